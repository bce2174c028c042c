#!/usr/bin/env python3
"""Backup-like source data for perf/ddbench, made where it runs (no corpus, no network).

  gensrc.py SIZE OUT                 generated: 64 MiB chunks, even ones gendata.py `csv`,
                                     odd ones gendata.py `mixed`, chunk k with seed k + 1
  gensrc.py SIZE OUT --slice F.zst   a real corpus slice (zstd-compressed), repeated to SIZE

SIZE takes K/M/G (powers of 1024). The same arguments give the same bytes, and a smaller
SIZE gives a prefix of a larger one. Chunks are made
in parallel (one process per CPU), so 2 GiB takes seconds on 16 cores. gendata.py is looked
for next to this file (the kit) and in tests/mount/tools/ (the repository).

What the generated data is: `csv` is a table export (ids, dates, names, amounts, status,
words; a pool of 8191 random rows per chunk); `mixed` is 35% csv, 15% random bytes, 30%
zeros, 20% csv. Averaged over the file: ~57% csv, 7.5% random, 15% zeros; lz4 ~2.6x,
zstd:1 ~3.4x with 256K blocks. Each chunk has its own seed, so no two chunks repeat.
"""
import multiprocessing
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHUNK = 64 << 20
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "tests", "mount", "tools")]
import gendata  # noqa: E402


def chunk(k, n):
    rng = gendata.random.Random(k + 1)
    if k % 2 == 0:
        return gendata.csv_bytes(n, rng)
    a, r, z = n * 35 // 100, n * 15 // 100, n * 30 // 100
    return (gendata.csv_bytes(a, rng) + rng.randbytes(r) + bytes(z) +
            gendata.csv_bytes(n - a - r - z, rng, 10**6))


def _job(args):
    k, n, out = args
    data = chunk(k, CHUNK)[:n]  # whole chunks, cut: a smaller SIZE gives a prefix
    assert len(data) == n
    fd = os.open(out, os.O_WRONLY)
    try:
        os.pwrite(fd, data, k * CHUNK)
    finally:
        os.close(fd)
    return n


def generate(size, out):
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.truncate(size)
    jobs = [(k, min(CHUNK, size - k * CHUNK), tmp) for k in range((size + CHUNK - 1) // CHUNK)]
    procs = min(len(jobs), len(os.sched_getaffinity(0))) or 1
    with multiprocessing.Pool(procs) as pool:
        done = sum(pool.imap_unordered(_job, jobs))
    assert done == size
    os.rename(tmp, out)


def from_slice(size, out, sl):
    data = subprocess.run(["zstd", "-dcq", sl], check=True, stdout=subprocess.PIPE).stdout
    if not data:
        sys.exit(f"gensrc: {sl} is empty")
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        left = size
        while left:
            f.write(data[:left])
            left -= min(left, len(data))
    os.rename(tmp, out)


def main():
    args = sys.argv[1:]
    sl = None
    if "--slice" in args:
        i = args.index("--slice")
        sl = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    size, out = gendata.parse_size(args[0]), args[1]
    if sl:
        from_slice(size, out, sl)
    else:
        generate(size, out)


if __name__ == "__main__":
    main()
