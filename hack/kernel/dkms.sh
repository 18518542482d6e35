#!/usr/bin/env bash
# Proves the kubeblade-leds DKMS package builds: `dkms add` and `dkms build`
# with the package's own dkms.conf, in a temporary DKMS and source tree (so
# nothing is installed and /usr/src and /var/lib/dkms are untouched), for
# every kernel whose headers are installed here (Debian's linux-headers-*),
# then checks the built module's modinfo.
#
#   hack/kernel/dkms.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
"$root/hack/kernel/deps.sh" dkms kmod
pkg=$root/kernel/kubeblade-leds
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$pkg/dkms.conf")
kernels=()
for b in /lib/modules/*/build; do
  [ -f "$b/Makefile" ] && kernels+=("$(basename "$(dirname "$b")")")
done
if [ ${#kernels[@]} = 0 ]; then
  "$root/hack/kernel/deps.sh" linux-headers-amd64
  for b in /lib/modules/*/build; do
    [ -f "$b/Makefile" ] && kernels+=("$(basename "$(dirname "$b")")")
  done
fi
[ ${#kernels[@]} -gt 0 ] || { echo "dkms: no kernel headers installed" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trees=(--sourcetree "$tmp/src" --dkmstree "$tmp/dkms" --installtree "$tmp/modules")
mkdir -p "$tmp/src" "$tmp/dkms" "$tmp/modules"
cp -r "$pkg" "$tmp/src/kubeblade-leds-$ver"
dkms add -m kubeblade-leds -v "$ver" "${trees[@]}" >"$tmp/add.log" 2>&1 || { cat "$tmp/add.log" >&2; exit 1; }
for k in "${kernels[@]}"; do
  start=$(date +%s)
  if ! dkms build -m kubeblade-leds -v "$ver" -k "$k" "${trees[@]}" >"$tmp/build-$k.log" 2>&1; then
    cat "$tmp/build-$k.log" >&2
    find "$tmp/dkms" -name make.log -exec tail -30 {} \; >&2
    exit 1
  fi
  ko=$(find "$tmp/dkms/kubeblade-leds/$ver/$k" -name 'kubeblade-leds.ko*' | head -1)
  [ -n "$ko" ] || { echo "dkms: no module built for $k" >&2; exit 1; }
  [ "$(modinfo -F license "$ko")" = GPL ] && [ "$(modinfo -F depends "$ko")" = led-class-multicolor ] &&
    [ "$(modinfo -F vermagic "$ko" | cut -d' ' -f1)" = "$k" ] ||
    { echo "dkms: unexpected modinfo for $ko:" >&2; modinfo "$ko" >&2; exit 1; }
  echo "dkms: kubeblade-leds $ver built for $k in $(($(date +%s) - start)) s (depends: $(modinfo -F depends "$ko"))"
done
