#!/usr/bin/env python3
"""perf/stacks.py SECONDS|--until-killed: an off-CPU view without perf's scheduler events.
Samples, every 2 ms, the top kernel frames (/proc/TID/stack, root only) of every thread of
the processes named dd, mount.cbfs and cbfs-nullfs, and prints how often each
(thread name, frames) was seen, most frequent first. A thread on a CPU shows as 'running'.
Used by perf/probe16.sh around one benchmark point."""
import collections
import os
import re
import signal
import sys
import time

NAMES = {"dd", "mount.cbfs", "cbfs-nullfs"}
FRAME = re.compile(r"\] ([A-Za-z0-9_.]+)")


def threads():
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() not in NAMES:
                    continue
            for tid in os.listdir(f"/proc/{pid}/task"):
                yield pid, tid
        except OSError:
            pass


def main():
    secs = float(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] != "--until-killed" else 1e9
    seen = collections.Counter()
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    end = time.monotonic() + secs
    rounds = 0
    while not stop[0] and time.monotonic() < end:
        for pid, tid in list(threads()):
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    comm = f.read().strip()
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                if state == "R":
                    key = "running"
                else:
                    with open(f"/proc/{pid}/task/{tid}/stack") as f:
                        key = " < ".join(FRAME.findall(f.read())[:4]) or state
            except OSError:
                continue
            seen[(comm, key)] += 1
        rounds += 1
        time.sleep(0.002)
    print(f"# {rounds} rounds")
    for (comm, key), n in seen.most_common(80):
        print(f"{n:7d}  {comm:<12} {key}")


main()
