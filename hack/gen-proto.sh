#!/usr/bin/env bash
# Generates the Go code for the protobuf APIs under api/ with the code
# generators pinned in hack/tools/proto (buf compiles the .proto files itself,
# so no protoc is needed). The tools are built once into bin/tools/<version>
# and reused, so a second run takes a second or two.
#
#   hack/gen-proto.sh          regenerate api/**/*.pb.go
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mod="$root/hack/tools/proto"
ver() { awk -v m="$1" '$1==m{print $2}' "$mod/go.mod"; }
dir="$root/bin/tools/buf-$(ver github.com/bufbuild/buf)-go-$(ver google.golang.org/protobuf)-grpc-$(ver google.golang.org/grpc/cmd/protoc-gen-go-grpc)"
mkdir -p "$dir"
for pkg in github.com/bufbuild/buf/cmd/buf google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc; do
  bin=$(basename "$pkg")
  [ -x "$dir/$bin" ] && continue
  echo "gen-proto: building $bin (first run only)" >&2
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -o "$dir/$bin.tmp" "$pkg")
  mv "$dir/$bin.tmp" "$dir/$bin"
done
cd "$root/api"
# buf runs the plugins from PATH; nothing else on PATH may shadow them.
PATH="$dir:$PATH" BUF_CACHE_DIR="$root/bin/tools/buf-cache" "$dir/buf" lint
PATH="$dir:$PATH" BUF_CACHE_DIR="$root/bin/tools/buf-cache" "$dir/buf" generate
