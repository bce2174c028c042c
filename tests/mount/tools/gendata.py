#!/usr/bin/env python3
"""Deterministic, realistic test data for the mount tests.

gendata.py csv SIZE OUT [SEED]    compressible CSV, like a table export
gendata.py mixed SIZE OUT [SEED]  CSV, a random (incompressible) run, a zero run, CSV
SIZE takes K/M/G suffixes (powers of 1024). Same arguments give the same bytes.
"""
import random
import sys

NAMES = ["ACME Corp", "Globex", "Initech", "Umbrella", "Hooli", "Stark Industries",
         "Wayne Enterprises", "Soylent", "Cyberdyne", "Tyrell", "Wonka", "Vandelay"]
STATUS = ["PAID", "OPEN", "OVERDUE", "CANCELLED", "REFUNDED"]
WORDS = ("invoice payment order shipment backup restore database table index "
         "customer account ledger region north south east west quarter").split()


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s[-1].upper() in mult:
        return int(s[:-1]) * mult[s[-1].upper()]
    return int(s)


def csv_bytes(n, rng, start_id=1):
    """Exactly n bytes of CSV lines (the last line may be cut). Row bodies come from
    a pool of 8191 random rows (fast: one format per row), ids keep increasing."""
    pool = ["2024-%02d-%02d,%s,%d.%02d,%s,%s %s %s\n" % (
        rng.randint(1, 12), rng.randint(1, 28), rng.choice(NAMES), rng.randint(1, 99999),
        rng.randint(0, 99), rng.choice(STATUS), rng.choice(WORDS), rng.choice(WORDS),
        rng.choice(WORDS)) for _ in range(8191)]
    out = ["id,date,customer,amount,status,comment\n"]
    total = len(out[0])
    i = start_id
    while total < n:
        line = "%d,%s" % (i, pool[(i * 7919) % 8191])
        out.append(line)
        total += len(line)
        i += 1
    return "".join(out).encode()[:n]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    kind, size, path = sys.argv[1], parse_size(sys.argv[2]), sys.argv[3]
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    if kind == "csv":
        data = csv_bytes(size, rng)
    elif kind == "mixed":
        a = size * 35 // 100
        r = size * 15 // 100
        z = size * 30 // 100
        data = (csv_bytes(a, rng) + rng.randbytes(r) + bytes(z) +
                csv_bytes(size - a - r - z, rng, 10**6))
    else:
        sys.exit(__doc__)
    assert len(data) == size
    with open(path, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
