#!/usr/bin/env python3
"""perf/switches.py [--comm cbfs-pool] < `perf script -F comm,tid,time,event,trace,ip,sym`
of a `perf record -a -g -e sched:sched_switch` run: where the threads named COMM were
off their CPU, and when. Target 4 of the performance issue (workers=1 against one codec
thread in memory) left the worker idle 8 % of a point's wall time with nothing to say
where (docs/PERF.md, twentieth session); this says it.

For every interval from a COMM thread's switch-out to its next switch-in it takes the
state it left in (S sleeping, D uninterruptible, R preempted) and what it waited on: the
first frame of its stack below the scheduler and the futex code, e.g. __lll_lock_wait (a
mutex held by another thread), a condition variable's wait (pthread_cond_wait: the
pool's queue empty), or a kernel frame (D: I/O, page faults). It prints the threads'
active span (first switch-in to last switch-out), the time off CPU in it by state and
wait, the same split by tenths of the span (so that the start of a point, its steady
state and its final fdatasync can be told apart), and the longest intervals.
A benchmark's helper: prints figures, never fails on them."""
import argparse
import collections
import re
import sys

HEAD = re.compile(r"^\s*(\S+)\s+(\d+)\s+(?:\[\d+\]\s+)?([\d.]+):\s+sched:sched_switch:\s+(.*)$")
# frames that say nothing about what was waited for
GENERIC = ("__schedule", "schedule", "futex", "__futex", "do_futex", "__x64_sys", "x64_sys",
           "do_syscall", "entry_SYSCALL", "syscall", "irqentry", "asm_", "exit_to_user",
           "__cond_resched", "[unknown]", "io_schedule", "preempt_schedule", "_cond_resched")


def frames(lines):
    out = []
    for ln in lines:
        parts = ln.split(None, 1)
        if len(parts) == 2:
            out.append(parts[1].split("+")[0].strip())
    return out


def wait_of(state, fr):
    """What an interval waited on: a libc wait, or the first telling kernel frame."""
    for f in fr:
        if "lll_lock_wait" in f or "mutex_lock" in f:
            return "mutex (__lll_lock_wait)"
        if "cond_wait" in f or "cond_timedwait" in f or "futex_abstimed_wait" in f:
            return "condition variable (%s)" % f
    if state.startswith("R"):
        return "preempted"
    for f in fr:
        if not f.startswith(GENERIC):
            return f
    return "futex (no user frame)" if any("futex" in f for f in fr) else "?"


def parse(stream, comm):
    """(time, 'out'|'in', tid, state, frames) events of the COMM threads, in time order."""
    ev = []
    block = []

    def flush():
        if not block:
            return
        m = HEAD.match(block[0])
        if m:
            t = float(m.group(3))
            tr = m.group(4)
            fr = frames(block[1:])
            pm = re.search(r"prev_comm=(.*?) prev_pid=(\d+) .*prev_state=(\S+) ==> "
                           r"next_comm=(.*?) next_pid=(\d+)", tr)
            if pm:
                if pm.group(1) == comm:
                    ev.append((t, "out", int(pm.group(2)), pm.group(3), fr))
                if pm.group(4) == comm:
                    ev.append((t, "in", int(pm.group(5)), "", []))
        block.clear()

    for ln in stream:
        if not ln.strip():
            flush()
        elif HEAD.match(ln):
            flush()
            block.append(ln)
        elif block:
            block.append(ln)
    flush()
    ev.sort(key=lambda e: e[0])
    return ev


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--comm", default="cbfs-pool")
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    ev = parse(sys.stdin, a.comm)
    if not ev:
        print(f"switches: no switch of a thread named {a.comm}")
        return
    out = {}
    ivals = []  # (start, length, tid, state, wait)
    for t, kind, tid, state, fr in ev:
        if kind == "out":
            out[tid] = (t, state, wait_of(state, fr))
        elif tid in out:
            t0, st, w = out.pop(tid)
            ivals.append((t0, t - t0, tid, st, w))
    ins = [e[0] for e in ev if e[1] == "in"]
    outs = [e[0] for e in ev if e[1] == "out"]
    if not ins or not outs:
        print("switches: no complete interval")
        return
    start, end = min(ins), max(outs)
    span = end - start
    # clipped to the span: the thread's wait for the first job, before it, and its
    # sleep after the last one, when the point is over, are not the point's
    ivals = [(max(s, start), min(s + d, end) - max(s, start), tid, st, w)
             for s, d, tid, st, w in ivals if s < end and s + d > start]
    tids = {e[2] for e in ev}
    off = sum(i[1] for i in ivals)
    print(f"# {a.comm}: {len(tids)} thread(s), active span {span:.3f} s, {len(ivals)} intervals "
          f"off CPU, {off:.3f} s off in all ({100 * off / span / len(tids):.1f} % of "
          f"{len(tids)} x the span)")
    by = collections.defaultdict(lambda: [0.0, 0])
    for _, d, _, st, w in ivals:
        k = f"{st[:1]} {w}"
        by[k][0] += d
        by[k][1] += 1
    print("\n## off CPU by state and wait (s, count)")
    for k, (d, n) in sorted(by.items(), key=lambda kv: -kv[1][0])[:20]:
        print(f"{d:8.3f} {n:7d}  {k}")
    print("\n## off CPU by tenth of the span (s; top two waits)")
    for i in range(10):
        lo, hi = start + span * i / 10, start + span * (i + 1) / 10
        tenth = collections.Counter()
        for s, d, _, st, w in ivals:
            ov = min(s + d, hi) - max(s, lo)
            if ov > 0:
                tenth[f"{st[:1]} {w}"] += ov
        tot = sum(tenth.values())
        tops = ", ".join(f"{k} {v:.3f}" for k, v in tenth.most_common(2))
        print(f"{i + 1:2d}  {tot:7.3f}  {tops}")
    print(f"\n## the {a.top} longest intervals (s after the span's start)")
    for s, d, tid, st, w in sorted(ivals, key=lambda i: -i[1])[:a.top]:
        print(f"at {s - start:8.3f}  {1000 * d:8.2f} ms  tid {tid}  {st} {w}")


if __name__ == "__main__":
    main()
