#!/usr/bin/env bash
# Builds a Go tool pinned by a module under hack/tools/<name> (declared with a
# `tool` directive) once into bin/tools/<name>-<version> and prints its path.
#
#   hack/tool.sh gotestsum
set -euo pipefail
name=$1
root=$(cd "$(dirname "$0")/.." && pwd)
mod="$root/hack/tools/$name"
pkg=$(awk '$1=="tool"{print $2}' "$mod/go.mod")
[ -n "$pkg" ] || { echo "tool.sh: $mod/go.mod declares no tool" >&2; exit 2; }
modpath=$(cd "$mod" && go list -m -f '{{.Path}}@{{.Version}}' "$(cd "$mod" && go list -f '{{.Module.Path}}' "$pkg")")
bin="$root/bin/tools/$name-${modpath##*@}"
if [ ! -x "$bin" ]; then
  mkdir -p "$root/bin/tools"
  exec 9>"$root/bin/tools/.$name.lock"
  flock 9
  if [ ! -x "$bin" ]; then
    echo "tool.sh: building $name (${modpath##*@})" >&2
    (cd "$mod" && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" "$pkg")
    mv "$bin.tmp" "$bin"
  fi
fi
echo "$bin"
