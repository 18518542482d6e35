#!/usr/bin/env bash
# Cross-compiles the kubeblade-leds module for arm64 (the blades' CPU)
# against the arm64 guest kernel of make hwtest-arm64 (hack/kernel/build.sh
# -a arm64: Debian's linux-source-6.12 with modules, the LED class
# multicolor as a module, devicetree, clock and pinctrl frameworks), so
# modpost checks every symbol the module uses against that kernel's own
# Module.symvers and modinfo records its dependency; runs checkpatch
# --strict over its sources, checks its modinfo and copies the modules to
# OUT (default bin/kmod/arm64), where make hwtest-arm64 loads them into that
# kernel. The module's vermagic is Debian's 6.12, so on a blade it proves the
# code compiles and links for arm64, not that it loads into a Raspberry Pi
# or Talos kernel (those need their own build).
#
#   hack/kernel/kmod-arm64.sh KERNEL_DIR [OUT]    KERNEL_DIR: what build.sh -a arm64 printed
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { sed -n '2,14p' "$0" >&2; exit 2; }
kernel=$1
out=$(realpath -m "${2:-$root/bin/kmod/arm64}")
cross=aarch64-linux-gnu-
grep -qx 'arch arm64' "$kernel/inputs" 2>/dev/null || { echo "kmod-arm64: $kernel is not an arm64 kernel from hack/kernel/build.sh" >&2; exit 2; }
"$root/hack/kernel/deps.sh" gcc-aarch64-linux-gnu kmod file
src=$("$root/hack/kernel/source.sh")

"$root/hack/kernel/kmod.sh" "$kernel/build" "$out" ARCH=arm64 CROSS_COMPILE=$cross

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
release=$(cat "$kernel/build/include/config/kernel.release")
ko="$out/kubeblade-leds.ko"
check "$ko" license '^GPL$'
check "$ko" alias '^platform:kubeblade-leds$'
check "$ko" description 'WS2812'
check "$ko" depends '^led-class-multicolor$'
check "$ko" vermagic "^${release//./\\.} .*aarch64"
file "$ko" | grep -q 'ARM aarch64' || { echo "kmod-arm64: $ko is not an arm64 object" >&2; fail=1; }
[ $fail = 0 ] || exit 1
echo "kmod-arm64: $ko: $(modinfo -F vermagic "$ko"), depends $(modinfo -F depends "$ko"), license $(modinfo -F license "$ko"), alias $(modinfo -F alias "$ko")"
