#!/usr/bin/env bash
# Installs what cbfs needs on Debian/Ubuntu, or with --check proves that the package
# lists below cover everything the build and the tests use.
#
#   scripts/deps.sh [--fuzz] [--test] [--perf] [--corpus]   install (idempotent)
#   scripts/deps.sh --check [MODE...]                        check (installs nothing)
#
# Modes: no option installs what building and the demo need; `--fuzz` adds clang and
# its libFuzzer/ASan runtimes (clang only recommends libclang-rt-14-dev, and
# recommendations are not installed); `--test` adds what the test suite uses (real
# PostgreSQL and MariaDB for the end-to-end tests, and --fuzz); `--perf` what perf/run
# uses (gnuplot, btrfs tools for the btrfs baseline); `--corpus` the PostgreSQL server
# perf/corpus loads.
# Installing asks dpkg which packages are missing and only then runs apt-get (one
# update, one install); also loads the fuse module if /dev/fuse is absent. Starts no
# service: the tests run their own throwaway servers.
#
# --check resolves every file the build and the tests use (commands, pkg-config
# modules and find_package() results read from CMakeLists.txt, headers, every file the
# compilers' link lines name for the plain, ASan+UBSan, TSan and libFuzzer builds,
# the PostgreSQL binaries), asks dpkg which package owns it, and fails, naming file and
# package, unless that package is in this file's list for the mode that needs it (or is
# pulled in by one, through Depends, or is part of every Debian system). Without a
# MODE it checks every mode, so everything must be installed; scripts/test.sh runs
# `--check --test --perf`. CBFS_DEPS_VERBOSE=1 lists every file with its package.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)

# ---- the Debian packages of each mode: the ONE place cbfs names them (scripts/fuzz.sh
# and perf/deps.sh install through this script). Every mode also gets build's.
declare -A PKGS=(
    [build]="build-essential cmake pkg-config libfuse3-dev fuse3 libzstd-dev liblz4-dev
             liblzma-dev libbz2-dev libxxhash-dev libcriterion-dev zstd lz4 xz-utils bzip2
             attr fio python3 util-linux procps psmisc coreutils tar"
    [fuzz]="clang libclang-rt-14-dev"
    [test]="postgresql postgresql-15 postgresql-client-15 mariadb-server mariadb-client
            mariadb-backup sqlite3 rsync acl man-db strace gdb dpkg-dev lintian apt systemd
            prometheus gnuplot-nox e2fsprogs btrfs-progs xfsprogs"
    [perf]="gnuplot-nox btrfs-progs btrfs-compsize"
    [corpus]="postgresql-15 postgresql-client-15 python3-pip"
)
MODES=(build fuzz test perf corpus)
declare -A IMPLIES=([test]=fuzz)  # a mode that also installs another's packages

# ---- what each mode uses (--check). need MODE KIND WHAT WHY, KIND one of
#   cmd     a command, looked up on Debian's own PATH (/usr/sbin:/usr/bin:/sbin:/bin):
#           a copy in /usr/local or ~ (pyenv, pip) would hide a missing package
#   file    an absolute path
#   header  a header, found the way `cc` finds it
#   lib     a library for -lWHAT, found the way `cc` finds it
#   pc      a pkg-config module (its .pc file)
#   pymod   a module of Debian's python3 (/usr/bin/python3)
#   link    "COMPILER FLAGS...": every library, runtime and object the compiler's link
#           line names for these flags (the sanitizer and libFuzzer runtimes)
# pkg-config modules and find_package() results come from CMakeLists.txt (needs_cmake).
needs() {
    need build cmd cc "the C compiler CMake uses (CC unset)"
    need build cmd cmake "configures every build"
    need build cmd make "CMake's Unix Makefiles generator"
    need build link "cc" "the plain build (build/)"
    need build cmd fusermount3 "unmounts (demo, mount tests)"
    need build cmd mountpoint "demo"
    needs_cmake

    need fuzz cmd clang "the fuzz build (scripts/fuzz.sh)"
    need fuzz link "clang -fsanitize=fuzzer,address,undefined" "the libFuzzer targets (build-fuzz/)"
    need fuzz link "clang -fsanitize=address,undefined,fuzzer-no-link" "cbfs-fuzz-seeds (build-fuzz/)"

    need test link "cc -fsanitize=address,undefined" "the ASan+UBSan build (build-asan/)"
    need test link "cc -fsanitize=thread" "the TSan build (build-tsan/)"
    need test lib xxhash "tests/mount/t_bad_store.sh builds tools/xxh3seal.c"
    local c
    for c in python3 timeout runuser setfattr getfattr getfacl setfacl zstd lz4 xz bzip2 fio \
             man strace pgrep tar sqlite3 rsync mariadb-install-db mariadbd mariadb \
             mariadb-admin mariadb-backup mariadb-dump chattr; do
        need test cmd "$c" "the mount tests"
    done
    need test cmd gdb "tests/mount/lib.sh: the stacks of a daemon that outlives its unmount"
    for c in mkfs.btrfs btrfs; do need test cmd "$c" "tests/mount/t_store_subvolumes.sh"; done
    for c in mkfs.ext4 e2fsck losetup pkg-config; do
        need test cmd "$c" "tests/mount/t_powercut.sh (ext4 on a loop device over tools/volatile.c)"
    done
    for c in mkfs.xfs xfs_repair; do need test cmd "$c" "tests/mount/t_powercut_xfs.sh"; done
    for c in initdb pg_ctl postgres psql pg_basebackup pg_verifybackup pg_dump pg_restore pgbench; do
        need test file "/usr/lib/postgresql/15/bin/$c" "tests/mount/t_e2e_pg.sh"
    done

    # the package, the systemd unit and the monitoring examples (scripts/package.sh,
    # tests/mount/t_package.sh, t_systemd_units.sh, t_tool_prometheus.sh, t_tool_stat.sh)
    for c in cpack dpkg-buildflags dpkg-parsechangelog dpkg-shlibdeps lintian apt-get man \
             systemd-analyze promtool gnuplot; do
        need test cmd "$c" "the package, unit and monitoring tests"
    done

    for c in gnuplot mkfs.btrfs compsize fio python3; do need perf cmd "$c" "perf/run"; done

    for c in initdb pg_ctl postgres pg_basebackup psql; do
        need corpus file "/usr/lib/postgresql/15/bin/$c" "perf/corpus"
    done
    need corpus pymod pip "perf/deps.sh --corpus installs tpchgen-cli with pip"
}

# needs_cmake: the pkg-config modules and find_package() results CMakeLists.txt uses.
needs_cmake() {
    local cml=$REPO/CMakeLists.txt m
    # pkg_check_modules(VAR REQUIRED IMPORTED_TARGET module) with a literal module
    for m in $(grep -oE 'pkg_check_modules\([^)]*\)' "$cml" | tr -d ')' | awk '{print $NF}' | grep -v '[$]'); do
        need build pc "$m" "CMakeLists.txt: pkg_check_modules"
    done
    # cbfs_codec(NAME OPTION PKG DEF): PKG is a pkg-config module, except bzip2 (find_package)
    for m in $(grep -oE '^cbfs_codec\([^)]*\)' "$cml" | awk '{print $3}'); do
        if [[ $m == bzip2 ]]; then need build header bzlib.h "CMakeLists.txt: find_package(BZip2)"
            need build lib bz2 "CMakeLists.txt: find_package(BZip2)"
        else need build pc "$m" "CMakeLists.txt: cbfs_codec"; fi
    done
    for m in $(grep -oE 'find_package\([A-Za-z0-9_]+' "$cml" | cut -d'(' -f2 | sort -u); do
        case $m in
        PkgConfig) need build cmd pkg-config "CMakeLists.txt: find_package(PkgConfig)" ;;
        Threads) need build lib pthread "CMakeLists.txt: find_package(Threads)" ;;
        BZip2) ;;  # the codec above
        *) CHECK_ERRS+=("CMakeLists.txt: find_package($m): deps.sh does not know what it needs; add it to needs_cmake") ;;
        esac
    done
}

# pkgs_of MODE: the packages installing MODE means, one a line.
pkgs_of() {
    local m
    for m in build ${IMPLIES[$1]:-} "$1"; do tr -s ' \n' '\n\n' <<<"${PKGS[$m]}"; done | grep . | awk '!seen[$0]++'
}

# ---------------------------------------------------------------- --check

mode_name() { if [[ $1 == build ]]; then echo "the build (no option)"; else echo "--$1"; fi; }

REQ_MODE=() REQ_WHAT=() REQ_WHY=() REQ_PATHS=()  # one entry a resolved requirement
CHECK_ERRS=()
CHECK_TMP=

# need MODE KIND WHAT WHY: resolves WHAT to the files it stands for (one requirement a
# file: a link line names many); what cannot be found is an error right away.
need() {
    local mode=$1 kind=$2 what=$3 why=$4 f
    local -a files=()
    case $kind in
    cmd)
        f=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$what" 2>/dev/null) && files=("$f") ;;
    file) [[ -e $what ]] && files=("$what") ;;
    header)
        f=$(printf '#include <%s>\n' "$what" | cc -xc -E -M - 2>/dev/null | tr ' \\' '\n\n' |
            grep -m1 -F "/$what") && files=("$f") ;;
    lib) f=$(lib_file cc "$what") && files=("$f") ;;
    pc) f=$(pkg-config --path "$what" 2>/dev/null) && files=("$f") ;;
    pymod)
        f=$(/usr/bin/python3 -c 'import importlib.util, sys; s = importlib.util.find_spec(sys.argv[1]); print(s.origin if s else "")' \
            "$what" 2>/dev/null) && [[ -n $f ]] && files=("$f") ;;
    link) link_files $what; return ;;  # split: COMPILER FLAGS...
    esac
    if ((${#files[@]} == 0)); then
        CHECK_ERRS+=("$mode: $kind $what ($why) not found: install its package and add it to PKGS[$mode] in scripts/deps.sh")
        return
    fi
    add_req "$mode" "${files[0]}" "$kind $what, $why"
}

declare -A REQ_SEEN=()
add_req() { # MODE FILE WHY (a file already needed by MODE is not added twice)
    [[ -z ${REQ_SEEN[$1 $2]:-} ]] || return 0
    REQ_SEEN[$1 $2]=1
    REQ_MODE+=("$1") REQ_PATHS+=("$2") REQ_WHAT+=("$2") REQ_WHY+=("$3")
}

# lib_file CC NAME: the file `CC ... -lNAME` links (shared first, as ld looks).
lib_file() {
    local cc=$1 ext f
    for ext in so a; do
        f=$("$cc" -print-file-name="lib$2.$ext" 2>/dev/null) || continue
        [[ $f == /* && -e $f ]] && { realpath -s "$f"; return 0; }
    done
    return 1
}

# link_files COMPILER FLAGS... (called through need MODE link): every file on the link
# line `COMPILER -### FLAGS` prints, -lNAME resolved as the linker would.
link_files() {
    local cc=$1 line tok f
    shift
    line=$(cd "$CHECK_TMP" && TMPDIR=$CHECK_TMP "$cc" -### "$@" -x c /dev/null -o "$CHECK_TMP/a.out" 2>&1 |
        awk '{t = $1; gsub(/"/, "", t)} t ~ /(collect2|\/ld(\.[a-z]+)?)$/' | tail -n 1) || true
    if [[ -z $line ]]; then
        CHECK_ERRS+=("$mode: no link line from \`$cc -### $*\` ($why): is $cc installed?")
        return
    fi
    for tok in $(tr -d '"' <<<"$line"); do
        f=
        case $tok in
        "$CHECK_TMP"/*) continue ;;  # the compiler's own temporaries
        -l*) f=$(lib_file "$cc" "${tok#-l}") ||
                 { CHECK_ERRS+=("$mode: $cc $* links $tok ($why), not found: install its package and add it to PKGS[$mode]"); continue; } ;;
        /*.a | /*.so | /*.o | /*.so.*) f=$(realpath -s "$tok") ;;
        *) continue ;;
        esac
        if [[ ! -e $f ]]; then
            CHECK_ERRS+=("$mode: $f, which \`$cc $*\` links ($why), is missing: install its package and add it to PKGS[$mode] in scripts/deps.sh")
            continue
        fi
        add_req "$mode" "$f" "linked by $cc $*, $why"
    done
}

# variants PATH: the names dpkg may know PATH by: itself, /usr-merged twins, its link
# target, and for an alternatives link every alternative (any of them will do).
variants() {
    local p=$1 q t
    for q in "$p" "$(realpath -e "$p" 2>/dev/null)"; do
        [[ -n $q ]] || continue
        echo "$q"
        case $q in
        /usr/bin/* | /usr/sbin/* | /usr/lib/* | /usr/lib64/*) echo "${q#/usr}" ;;
        /bin/* | /sbin/* | /lib/* | /lib64/*) echo "/usr$q" ;;
        esac
    done
    if [[ -L $p ]] && t=$(readlink "$p") && [[ $t == /etc/alternatives/* ]]; then
        update-alternatives --list "${t#/etc/alternatives/}" 2>/dev/null | while read -r q; do variants "$q"; done
    fi
}

# closure MODE: the installed packages installing MODE brings in (Depends and
# Pre-Depends, recursively: apt-get runs with --no-install-recommends).
closure() {
    pkgs_of "$1" | xargs apt-cache depends --recurse --installed --no-recommends --no-suggests \
        --no-conflicts --no-breaks --no-replaces --no-enhances 2>/dev/null |
        grep -v '^ ' | sed 's/:.*//' | sort -u
}

check() {
    local modes=() want=("$@") m i p a line
    ((${#want[@]})) || want=("${MODES[@]}")
    # the modes asked for and those they imply, in MODES order
    for m in "${MODES[@]}"; do
        for a in "${want[@]}"; do
            [[ $a == "$m" || ${IMPLIES[$a]:-} == "$m" ]] && { modes+=("$m"); break; }
        done
    done
    CHECK_TMP=$(mktemp -d /tmp/cbfs-deps.XXXXXX)
    trap 'rm -rf "$CHECK_TMP"' EXIT
    needs
    # which package owns each file (one dpkg call for all of them)
    declare -A owners=() base=()
    local -a all=()
    for ((i = 0; i < ${#REQ_PATHS[@]}; i++)); do
        mapfile -t -O "${#all[@]}" all < <(variants "${REQ_PATHS[i]}")
    done
    while IFS= read -r line; do
        [[ $line == diversion* ]] && continue
        p=${line#*: }
        owners[$p]=$(sed 's/:[a-z0-9]*\(,\|$\)/\1/g; s/,//g' <<<"${line%%: *}")
    done < <(printf '%s\n' "${all[@]}" | sort -u | xargs -d '\n' dpkg -S 2>/dev/null || true)
    # what every Debian system has: essential and required packages
    while read -r p e pr; do
        [[ $e == yes || $pr == required ]] && base[$p]=1
    done < <(dpkg-query -W -f='${Package} ${Essential} ${Priority}\n' 2>/dev/null)

    local nchecked=0 v o found ok
    declare -A covered=()
    for m in "${modes[@]}"; do
        covered=()
        for p in $(closure "$m"); do covered[$p]=1; done
        for ((i = 0; i < ${#REQ_PATHS[@]}; i++)); do
            [[ ${REQ_MODE[i]} == "$m" ]] || continue
            nchecked=$((nchecked + 1))
            found= ok=0
            for v in $(variants "${REQ_PATHS[i]}"); do
                for o in ${owners[$v]:-}; do
                    [[ " $found " == *" $o "* ]] || found+=" $o"
                    [[ -n ${covered[$o]:-} || -n ${base[$o]:-} ]] && ok=1
                done
            done
            [[ ${CBFS_DEPS_VERBOSE:-0} == 1 ]] && printf '  %-6s %-70s %s\n' "$m" "${REQ_WHAT[i]}" "${found# }"
            ((ok)) && continue
            if [[ -z $found ]]; then
                CHECK_ERRS+=("$m: ${REQ_WHAT[i]} (${REQ_WHY[i]}) belongs to no Debian package (installed by hand?); cbfs needs it from a package listed in PKGS[$m] of scripts/deps.sh")
            else
                CHECK_ERRS+=("$m: ${REQ_WHAT[i]} (${REQ_WHY[i]}) comes from package${found}, which scripts/deps.sh does not install for $(mode_name "$m"): add it to PKGS[$m]")
            fi
        done
    done
    if ((${#CHECK_ERRS[@]})); then
        local errs
        errs=$(printf '%s\n' "${CHECK_ERRS[@]}" | awk '!seen[$0]++')
        sed 's/^/deps --check: /' <<<"$errs" >&2
        echo "deps --check: FAILED, $(wc -l <<<"$errs") problem(s) for modes ${modes[*]}" >&2
        exit 1
    fi
    echo "deps --check: $nchecked files used by modes ${modes[*]}, each from a package deps.sh installs"
}

# ---------------------------------------------------------------- install

do_check=0
modes=()
for arg in "$@"; do
    case $arg in
    --check) do_check=1 ;;
    --fuzz | --test | --perf | --corpus) modes+=("${arg#--}") ;;
    *) echo "deps: unknown option $arg (use --fuzz, --test, --perf, --corpus, --check)" >&2; exit 2 ;;
    esac
done
if ((do_check)); then
    ((${#modes[@]} == 0)) || modes=(build "${modes[@]}")
    check "${modes[@]}"
    exit 0
fi

mapfile -t pkgs < <(for m in build "${modes[@]}"; do pkgs_of "$m"; done | awk '!seen[$0]++')
missing=()
for p in "${pkgs[@]}"; do
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
    # Maintainer scripts would start the distribution's postgresql, mariadb and
    # prometheus services (prometheus on 0.0.0.0:9090, no authentication): policy-rc.d
    # keeps them down during the install, with or without systemd, and goes away on
    # every exit path (an interrupted install must not leave it blocking later ones).
    policy=/usr/sbin/policy-rc.d
    added_policy=0
    if [[ ! -e $policy ]]; then
        trap '"${sudo[@]}" rm -f "$policy"' EXIT
        printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod 755 "$policy"
        added_policy=1
    fi
    before=$(dpkg-query -W -f='${Package}\n' | sort)
    rc=0
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -q || rc=$?
    if ((rc == 0)); then
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 \
            install -y -q --no-install-recommends "${missing[@]}" || rc=$?
    fi
    if ((added_policy)); then
        "${sudo[@]}" rm -f "$policy"
        trap - EXIT
    fi
    # Under systemd the packages also enabled their units for the next boot: the
    # tests run their own throwaway servers, so the ones this run installed (with
    # their dependencies: postgresql.service is postgresql-common's) are disabled
    # again; a package that was already there keeps its state.
    if [[ -d /run/systemd/system ]]; then
        for p in $(comm -13 <(echo "$before") <(dpkg-query -W -f='${Package}\n' | sort)); do
            { dpkg-query -L "$p" 2>/dev/null || true; } |
                { grep -E '^/(usr/)?lib/systemd/system/[^/]+\.service$' || true; } |
                while read -r unit; do
                    u=$(basename "$unit")
                    [[ $(systemctl is-enabled "$u" 2>/dev/null) == enabled ]] || continue
                    echo "deps: disabling $u (installed for the tests; they start their own)"
                    "${sudo[@]}" systemctl disable --now "$u" >/dev/null 2>&1 || true
                done
        done
    fi
    ((rc == 0)) || exit "$rc"
else
    echo "deps: all ${#pkgs[@]} packages present"
fi

if [[ ! -e /dev/fuse ]]; then
    echo "deps: /dev/fuse missing, loading the fuse module"
    if [[ $(id -u) -eq 0 ]]; then modprobe fuse || true; else sudo modprobe fuse || true; fi
    [[ -e /dev/fuse ]] || { echo "deps: /dev/fuse still missing (in a container? pass --device /dev/fuse --cap-add SYS_ADMIN)" >&2; exit 1; }
fi
