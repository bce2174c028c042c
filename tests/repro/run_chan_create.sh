#!/usr/bin/env bash
set -eu
cd "$(dirname "$0")/../.."
gcc -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc $(pkg-config --cflags fuse3) -o build/chan_create tests/repro/chan_create.c build/libcbfscore.a $(pkg-config --libs fuse3) -lpthread 2>&1
./build/chan_create
