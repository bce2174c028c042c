#!/usr/bin/env bash
# Installs what cbfs needs to build, test and demo on Debian/Ubuntu.
# Idempotent: asks dpkg which packages are missing and only then runs apt-get
# (one update, one install); also loads the fuse module if /dev/fuse is absent.
set -euo pipefail

PKGS=(build-essential cmake pkg-config libfuse3-dev fuse3 libzstd-dev liblz4-dev liblzma-dev
      libbz2-dev libxxhash-dev libcriterion-dev zstd lz4 xz-utils bzip2 attr fio python3
      util-linux procps psmisc coreutils)

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
    "${sudo[@]}" apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
    echo "deps: all ${#PKGS[@]} packages present"
fi

if [[ ! -e /dev/fuse ]]; then
    echo "deps: /dev/fuse missing, loading the fuse module"
    if [[ $(id -u) -eq 0 ]]; then modprobe fuse || true; else sudo modprobe fuse || true; fi
    [[ -e /dev/fuse ]] || { echo "deps: /dev/fuse still missing (in a container? pass --device /dev/fuse --cap-add SYS_ADMIN)" >&2; exit 1; }
fi
