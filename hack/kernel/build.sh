#!/usr/bin/env bash
# Builds a small kernel from Debian's linux-source-6.12 (hack/kernel/source.sh)
# as `make tinyconfig` plus config fragments, and prints the directory that
# holds the result:
#
#   <dir>/bzImage (x86_64) or <dir>/Image (arm64)   the kernel
#   <dir>/config                                   its .config
#   <dir>/build/                                   the O= output tree: Module.symvers,
#                                                  usr/gen_init_cpio, what `make M=` needs
#   <dir>/inputs                                   what the key was computed from
#
# Usage:
#   hack/kernel/build.sh [-a x86_64|arm64] [-n NAME] [-d TREE_DIR=SRC_DIR]... FRAGMENT...
#
#   -a  architecture (default x86_64; arm64 cross-compiles with aarch64-linux-gnu-)
#   -n  a name for the build profile (default guest); each profile keeps its own
#       persistent O= directory, so changing a fragment rebuilds incrementally
#   -d  adds an in-tree driver directory: SRC_DIR appears as TREE_DIR (e.g.
#       drivers/leds/kubeblade=kernel/leds) in the tree that is built, and the
#       parent's Kconfig and Makefile get a `source` and an `obj-y +=` line
#   FRAGMENT  Kconfig fragments merged in order; every option they set must
#       survive olddefconfig, or the build fails naming it
#
# The result is cached under ${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade/kernel/
# NAME-ARCH-KEY, where KEY hashes every input: this script, the source
# version, the compiler, the fragments and the driver directories' files. A
# build happens in the profile's persistent O= directory under flock, is
# copied to a temporary directory and renamed into place, so concurrent runs
# build once and readers never see half a result. The pristine source tree is
# never written to: builds use a symlink copy of it (work/NAME-ARCH/src), in
# which only the patched Kconfig/Makefile files and the driver links are real.
# Profiles that share a NAME (builds with different fragments, say) share the
# O= directory and rebuild only what their configs change.
set -euo pipefail
self=$(readlink -f "$0")
here=$(dirname "$self")
arch=x86_64
name=guest
dirs=()
while getopts "a:n:d:" opt; do
  case $opt in
    a) arch=$OPTARG ;;
    n) name=$OPTARG ;;
    d) dirs+=("$OPTARG") ;;
    *) sed -n '2,25p' "$self" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "kernel/build: give at least one config fragment" >&2; exit 2; }
case $arch in
  x86_64) karch=x86_64; cross=; image=arch/x86/boot/bzImage ;;
  arm64) karch=arm64; cross=aarch64-linux-gnu-; image=arch/arm64/boot/Image ;;
  *) echo "kernel/build: unknown architecture $arch" >&2; exit 2 ;;
esac
frags=()
for f in "$@"; do
  [ -f "$f" ] || { echo "kernel/build: no fragment $f" >&2; exit 2; }
  frags+=("$(readlink -f "$f")")
done
declare -A dirmap=()
for d in "${dirs[@]}"; do
  t=${d%%=*} s=${d#*=}
  [ -n "$t" ] && [ "$t" != "$d" ] && [ -d "$s" ] || { echo "kernel/build: -d wants TREE_DIR=SRC_DIR with an existing SRC_DIR, got $d" >&2; exit 2; }
  dirmap[$t]=$(readlink -f "$s")
done

src=$("$here/source.sh")
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade/kernel"
inputs() {
  echo "script $(sha256sum <"$self" | cut -d' ' -f1)"
  echo "source $(basename "$src")"
  echo "arch $arch"
  echo "compiler $("${cross}gcc" --version | head -1)"
  for f in "${frags[@]}"; do
    echo "fragment $(basename "$f") $(sha256sum <"$f" | cut -d' ' -f1)"
  done
  for t in $(printf '%s\n' "${!dirmap[@]}" | sort); do
    echo "dir $t $(cd "${dirmap[$t]}" && find . -type f ! -name '*.o' ! -name '*.ko' ! -name '.*.cmd' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"
  done
}
key=$(inputs | sha256sum | cut -c1-16)
out="$cache/$name-$arch-$key"
if [ -f "$out/.done" ]; then
  echo "$out"
  exit 0
fi

mkdir -p "$cache/work"
exec 9>"$cache/.lock-$name-$arch"
flock 9
if [ -f "$out/.done" ]; then # built by a concurrent run while we waited
  echo "$out"
  exit 0
fi
start=$(date +%s)
work="$cache/work/$name-$arch"
tree="$work/src" obj="$work/obj" log="$work/build.log"
mkdir -p "$work" "$obj"

# The tree: a symlink copy of the pristine source, made once per source
# version. Driver directories are applied as a few real files and links on
# top, recorded in $work/patched so the next build undoes exactly those
# first; links keep their targets' times, so nothing rebuilds for that.
if [ "$(cat "$work/src.version" 2>/dev/null)" != "$src" ] || [ ! -f "$tree/Makefile" ]; then
  echo "kernel/build: preparing the source tree for $name-$arch" >&2
  rm -rf "$tree" "$work/src.version" "$work/patched"
  cp -as "$src" "$tree"
  echo "$src" >"$work/src.version"
fi
rm -f "$work/layout" # an older build.sh's record of the tree
if [ -f "$work/patched" ]; then
  while IFS= read -r rel; do
    rm -rf "${tree:?}/$rel"
    if [ -e "$src/$rel" ]; then ln -s "$src/$rel" "$tree/$rel"; fi
  done <"$work/patched"
  rm -f "$work/patched"
fi
declare -A copied=()
for t in $(printf '%s\n' "${!dirmap[@]}" | sort); do
  parent=$(dirname "$t") base=$(basename "$t")
  printf '%s\n' "$t" >>"$work/patched"
  if [ -z "${copied[$parent]:-}" ]; then
    printf '%s\n' "$parent/Kconfig" "$parent/Makefile" >>"$work/patched"
    for f in Kconfig Makefile; do
      rm -f "$tree/$parent/$f"
      cat "$src/$parent/$f" >"$tree/$parent/$f"
    done
    copied[$parent]=1
  fi
  echo "source \"$t/Kconfig\"" >>"$tree/$parent/Kconfig"
  echo "obj-y += $base/" >>"$tree/$parent/Makefile"
  ln -sfn "${dirmap[$t]}" "$tree/$t"
done

kmake() { make -C "$tree" O="$obj" ARCH="$karch" CROSS_COMPILE="$cross" "$@"; }
echo "kernel/build: building $name-$arch ($key) in $obj, log in $log" >&2
{
  kmake tinyconfig
  "$tree/scripts/kconfig/merge_config.sh" -m -O "$obj" "$obj/.config" "${frags[@]}"
  kmake olddefconfig
} >"$log" 2>&1 || { tail -40 "$log" >&2; exit 1; }

# Every option a fragment sets must be in the final config.
lost=()
while IFS= read -r line; do
  case $line in
    CONFIG_*=*) grep -qxF -- "$line" "$obj/.config" || lost+=("$line") ;;
    "# CONFIG_"*" is not set") grep -q "^${line:2}" "$obj/.config" 2>/dev/null && lost+=("$line") ;;
  esac
done < <(cat "${frags[@]}")
if [ ${#lost[@]} -gt 0 ]; then
  echo "kernel/build: these fragment options did not survive olddefconfig (a dependency is missing):" >&2
  printf '  %s\n' "${lost[@]}" >&2
  exit 1
fi

kmake -j"$(nproc)" all >>"$log" 2>&1 || { tail -60 "$log" >&2; exit 1; }

tmp=$(mktemp -d "$cache/.tmp-$name-$arch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$obj/$image" "$tmp/"
cp "$obj/.config" "$tmp/config"
cp -a "$obj" "$tmp/build"
inputs >"$tmp/inputs"
touch "$tmp/.done"
rm -rf "$out"
mv -T "$tmp" "$out"
trap - EXIT
echo "kernel/build: $name-$arch built in $(($(date +%s) - start)) s -> $out" >&2

# Keep the three newest results of this profile.
ls -1dt "$cache/$name-$arch-"* 2>/dev/null | tail -n +4 | while read -r old; do
  rm -rf "$old"
done
echo "$out"
