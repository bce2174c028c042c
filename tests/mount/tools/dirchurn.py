#!/usr/bin/env python3
"""dirchurn DIR TAG SECONDS: changes DIR for SECONDS with names of its own
(TAG in each): creates files (written and closed, so compressed ones get a
sidecar), renames them (to a free name, over another of its files), unlinks
them, makes and removes directories holding a file. Removes every name it
made before it exits. Exit 0, or 1 with the error."""
import os, sys, time

def main():
    d, tag, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
    end = time.monotonic() + secs
    i = 0
    live = []
    payload = (b'churn data %s ' % tag.encode()) * 3000
    while time.monotonic() < end:
        i += 1
        a = os.path.join(d, 'c_%s_%d' % (tag, i))
        with open(a, 'wb') as f:
            f.write(payload[: 100 + (i * 997) % len(payload)])
        b = os.path.join(d, 'r_%s_%d' % (tag, i))
        os.rename(a, b)
        live.append(b)
        if len(live) > 3:
            os.rename(live.pop(0), live[0])  # over another file of ours
        if len(live) > 5:
            os.unlink(live.pop(0))
        if i % 5 == 0:
            sub = os.path.join(d, 'dir_%s_%d' % (tag, i))
            os.mkdir(sub)
            with open(os.path.join(sub, 'f'), 'wb') as f:
                f.write(payload[:5000])
            os.rename(sub, sub + '_m')
            os.unlink(os.path.join(sub + '_m', 'f'))
            os.rmdir(sub + '_m')
    for p in live:
        os.unlink(p)
    print('%s: %d rounds' % (tag, i))

if __name__ == '__main__':
    try:
        main()
    except OSError as e:
        print('dirchurn: %s' % e)
        sys.exit(1)
