#!/usr/bin/env bash
# Installs the Debian packages the kernel rig needs when they are missing:
# the kernel build's tools and QEMU. CI runs on a fresh machine, so
# `make hwtest` calls this first; on a prepared machine it only checks.
#
#   hack/kernel/deps.sh [extra-package...]
set -euo pipefail
want=(gcc make flex bison bc cpio perl xz-utils libelf-dev libssl-dev qemu-system-x86 "$@")
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "kernel/deps: installing ${missing[*]}" >&2
sudo_=; [ "$(id -u)" = 0 ] || sudo_=sudo
$sudo_ apt-get update -q >&2
DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
