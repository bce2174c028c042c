#!/usr/bin/env bash
# What the performance suite needs: the project's packages plus gnuplot and the btrfs
# tools (scripts/deps.sh --perf), and with --corpus the PostgreSQL server and
# tpchgen-cli from PyPI for perf/corpus. Idempotent.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

want_corpus=0
[[ ${1:-} == --corpus ]] && want_corpus=1
if ((want_corpus)); then "$HERE/../scripts/deps.sh" --perf --corpus; else "$HERE/../scripts/deps.sh" --perf; fi

if ((want_corpus)) && ! command -v tpchgen-cli >/dev/null; then
    echo "perf deps: installing tpchgen-cli from PyPI"
    # Debian's system pip refuses global installs (PEP 668) unless told otherwise.
    python3 -m pip install -q tpchgen-cli 2>/dev/null ||
        python3 -m pip install -q --break-system-packages tpchgen-cli
fi
