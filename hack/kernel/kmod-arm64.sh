#!/usr/bin/env bash
# Cross-compiles the kubeblade-leds module for arm64 (the blades' CPU)
# against Debian's linux-source-6.12 with the arm64 defconfig, runs
# checkpatch --strict over its sources and checks its modinfo, and copies the
# modules to OUT (default bin/kmod/arm64).
#
# The prepared arm64 tree (defconfig + modules_prepare) is cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade/kernel/arm64-prep-KEY, KEY hashing
# this script, the source version and the compiler; it is built in a temp
# directory under flock and renamed into place. modules_prepare makes no
# Module.symvers, so this build runs modpost with KBUILD_MODPOST_WARN=1: every
# symbol the module uses is checked against a real Module.symvers by the
# guest kernel's build in make hwtest (test/kmod), whose config has the
# devicetree, clock and pinctrl frameworks for that reason. The module's
# vermagic is Debian's 6.12, so it proves the code compiles and links for
# arm64, not that it loads into a Raspberry Pi or Talos kernel.
#
#   hack/kernel/kmod-arm64.sh [OUT]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/bin/kmod/arm64}
cross=aarch64-linux-gnu-
"$root/hack/kernel/deps.sh" gcc-aarch64-linux-gnu kmod file
src=$("$root/hack/kernel/source.sh")
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade/kernel"
key=$( { sha256sum <"$0"; basename "$src"; "${cross}gcc" --version | head -1; } | sha256sum | cut -c1-16)
prep="$cache/arm64-prep-$key"
mkdir -p "$cache"
if [ ! -f "$prep/.done" ]; then
  exec 9>"$cache/.lock-arm64-prep"
  flock 9
  if [ ! -f "$prep/.done" ]; then
    start=$(date +%s)
    tmp=$(mktemp -d "$cache/.tmp-arm64-prep.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    echo "kmod-arm64: preparing an arm64 defconfig tree in $prep" >&2
    if ! make -C "$src" O="$tmp" ARCH=arm64 CROSS_COMPILE=$cross defconfig modules_prepare >"$tmp/prep.log" 2>&1; then
      tail -30 "$tmp/prep.log" >&2
      exit 1
    fi
    touch "$tmp/.done"
    rm -rf "$prep"
    mv -T "$tmp" "$prep"
    trap - EXIT
    echo "kmod-arm64: prepared in $(($(date +%s) - start)) s" >&2
    ls -1dt "$cache/arm64-prep-"* 2>/dev/null | tail -n +3 | xargs -r rm -rf
  fi
  exec 9>&-
fi

"$root/hack/kernel/kmod.sh" "$prep" "$out" ARCH=arm64 CROSS_COMPILE=$cross KBUILD_MODPOST_WARN=1

# checkpatch --strict over the driver's own files.
cd "$root/kernel/kubeblade-leds"
"$src/scripts/checkpatch.pl" --strict --no-tree --quiet -f ./*.c ./*.h Kbuild Kconfig Makefile
echo "kmod-arm64: checkpatch --strict clean"

fail=0
check() { # file field pattern
  local got
  got=$(modinfo -F "$2" "$1")
  if ! grep -qE -- "$3" <<<"$got"; then
    echo "kmod-arm64: $(basename "$1") modinfo $2 is \"$got\", want /$3/" >&2
    fail=1
  fi
}
ko="$out/kubeblade-leds.ko"
check "$ko" license '^GPL$'
check "$ko" alias '^platform:kubeblade-leds$'
check "$ko" description 'WS2812'
check "$ko" vermagic 'aarch64'
file "$ko" | grep -q 'ARM aarch64' || { echo "kmod-arm64: $ko is not an arm64 object" >&2; fail=1; }
[ $fail = 0 ] || exit 1
echo "kmod-arm64: $ko: $(modinfo -F vermagic "$ko"), license $(modinfo -F license "$ko"), alias $(modinfo -F alias "$ko")"
