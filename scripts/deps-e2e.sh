#!/usr/bin/env bash
# Installs what the end-to-end backup-tool tests (tests/mount/t_e2e_*.sh) need on
# Debian 12: PostgreSQL 15, MariaDB server + mariadb-backup, sqlite3, rsync, attr, acl.
# Idempotent: asks dpkg which packages are missing, then one apt-get update + install
# (waiting for the dpkg lock if another install is running).
# Does not start or enable any service: the tests start their own throwaway servers.
set -euo pipefail

PKGS=(postgresql postgresql-15 postgresql-client-15 mariadb-server mariadb-client mariadb-backup
      sqlite3 rsync attr acl tar python3 util-linux procps)

missing=()
for p in "${PKGS[@]}"; do
    # "install ok installed" is the only state in which the package is usable.
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$st" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
    echo "deps-e2e: all ${#PKGS[@]} packages present"
    exit 0
fi

echo "deps-e2e: installing ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "deps-e2e: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
fi
# Package maintainer scripts would start the distribution's own postgresql/mariadb
# services; the tests never use them. In a container without an init system
# (no running systemd) policy-rc.d stops that for the duration of the install.
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
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
        "${missing[@]}" || rc=$?
fi
((added_policy)) && "${sudo[@]}" rm -f "$policy"
exit "$rc"
