#!/usr/bin/env bash
# Installs what cbfs needs on Debian/Ubuntu: `scripts/deps.sh` for building and the
# demo; `--test` adds what the test suite uses (real PostgreSQL and MariaDB for the
# end-to-end tests, clang and its libFuzzer/ASan runtimes for the fuzzers: clang only
# recommends libclang-rt-14-dev, and recommendations are not installed); `--perf` what
# perf/run uses (gnuplot, btrfs tools for the btrfs baseline); `--corpus` the
# PostgreSQL server perf/corpus loads.
# Idempotent: asks dpkg which packages are missing and only then runs apt-get (one
# update, one install); also loads the fuse module if /dev/fuse is absent. Starts no
# service: the tests run their own throwaway servers.
set -euo pipefail

PKGS=(build-essential cmake pkg-config libfuse3-dev fuse3 libzstd-dev liblz4-dev liblzma-dev
      libbz2-dev libxxhash-dev libcriterion-dev zstd lz4 xz-utils bzip2 attr fio python3
      util-linux procps psmisc coreutils tar)
for arg in "$@"; do
    case $arg in
    --test) PKGS+=(postgresql postgresql-15 postgresql-client-15 mariadb-server mariadb-client
                   mariadb-backup sqlite3 rsync acl clang libclang-rt-14-dev man-db) ;;
    --perf) PKGS+=(gnuplot-nox btrfs-progs btrfs-compsize) ;;
    --corpus) PKGS+=(postgresql-15 postgresql-client-15 python3-pip) ;;
    *) echo "deps: unknown option $arg (use --test, --perf, --corpus)" >&2; exit 2 ;;
    esac
done

missing=()
for p in "${PKGS[@]}"; do
    # "install ok installed" is the only state in which the package is usable.
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$st" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]})); then
    echo "deps: installing ${missing[*]}"
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || { echo "deps: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
        sudo=(sudo)
    fi
    # Maintainer scripts would start the distribution's postgresql/mariadb services;
    # without a running systemd (containers, CI) policy-rc.d keeps them down.
    policy=/usr/sbin/policy-rc.d
    added_policy=0
    if [[ ! -e $policy && ! -d /run/systemd/system ]]; then
        printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod 755 "$policy"
        added_policy=1
    fi
    rc=0
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -q || rc=$?
    if ((rc == 0)); then
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 \
            install -y -q --no-install-recommends "${missing[@]}" || rc=$?
    fi
    ((added_policy)) && "${sudo[@]}" rm -f "$policy"
    ((rc == 0)) || exit "$rc"
else
    echo "deps: all ${#PKGS[@]} packages present"
fi

if [[ ! -e /dev/fuse ]]; then
    echo "deps: /dev/fuse missing, loading the fuse module"
    if [[ $(id -u) -eq 0 ]]; then modprobe fuse || true; else sudo modprobe fuse || true; fi
    [[ -e /dev/fuse ]] || { echo "deps: /dev/fuse still missing (in a container? pass --device /dev/fuse --cap-add SYS_ADMIN)" >&2; exit 1; }
fi
