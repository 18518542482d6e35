#!/usr/bin/env bash
# Builds the kubeblade-leds kernel module (kernel/kubeblade-leds) out of tree
# against a prepared kernel build directory and copies the .ko files to OUT.
# `make M=` writes objects beside the sources, so it builds from a copy and
# the repository stays clean. modpost warnings (a symbol the kernel does not
# export, a GPL-only symbol) fail the build unless KBUILD_MODPOST_WARN=1 is
# given for a tree without a Module.symvers; the build log is OUT/build.log.
#
#   hack/kernel/kmod.sh KERNEL_BUILD_DIR OUT_DIR [make variable=value ...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 2 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
kdir=$1 out=$2
shift 2
[ -f "$kdir/Makefile" ] || { echo "kmod: $kdir is not a kernel build directory" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/kernel/kubeblade-leds/." "$tmp/"
mkdir -p "$out"
log="$out/build.log"
if ! make -C "$kdir" M="$tmp" "$@" modules >"$log" 2>&1; then
  tail -40 "$log" >&2
  exit 1
fi
warn=0
for a in "$@"; do [ "$a" = KBUILD_MODPOST_WARN=1 ] && warn=1; done
if [ $warn = 0 ] && grep -E '^(WARNING|ERROR): modpost' "$log" >&2; then
  echo "kmod: modpost complained (above); see $log" >&2
  exit 1
fi
rm -f "$out"/*.ko
cp "$tmp"/*.ko "$out/"
