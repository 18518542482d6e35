#!/usr/bin/env bash
# Unpacks Debian's linux-source-6.12 (installing the package if it is missing)
# once into the shared cache and prints the tree's path. Every kernel build of
# the project (the QEMU guest kernel, KUnit, the LED driver's module builds)
# starts from this pristine tree and builds out of it with O=, so the tree is
# never written to after unpacking.
#
#   hack/kernel/source.sh        prints e.g. ~/.cache/kubeblade/kernel/src/linux-6.12.117
set -euo pipefail
pkg=linux-source-6.12
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade/kernel/src"
mkdir -p "$cache"

if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
  echo "kernel/source: installing $pkg" >&2
  sudo_=; [ "$(id -u)" = 0 ] || sudo_=sudo
  $sudo_ apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -q "$pkg" >&2
fi
# Debian's version (6.12.117-1~deb12u1) without the packaging revision.
ver=$(dpkg-query -W -f='${Version}' "$pkg" | sed 's/-.*//')
dir="$cache/linux-$ver"

exec 9>"$cache/.lock"
flock 9
if [ ! -f "$dir/.unpacked" ]; then
  echo "kernel/source: unpacking $pkg $ver into $dir (about a minute)" >&2
  tmp=$(mktemp -d "$cache/.unpack.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  tar -C "$tmp" -xJf "/usr/src/$pkg.tar.xz"
  rm -rf "$dir"
  mv "$tmp/$pkg" "$dir"
  touch "$dir/.unpacked"
fi
echo "$dir"
