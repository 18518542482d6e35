#!/usr/bin/env bash
# Writes the table of the last `make bench-apicost` (bin/apicost.md, with
# the commit, start time and load average it recorded in bin/apicost.run)
# into FILE's generated block "apicost" (hack/benchdoc). make bench-apicost
# runs it when BENCH_DOC is set.
#
#   hack/apicost-doc.sh FILE WINDOW
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
file="$1" window="$2"
[ -s bin/apicost.md ] && [ -s bin/apicost.run ] || { echo "no bin/apicost.md or bin/apicost.run: run make bench-apicost first" >&2; exit 1; }
read -r commit began load0 < bin/apicost.run
cpu_model=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
ram=$(awk '/^MemTotal:/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)
{
  printf 'Measured by `make bench-apicost APICOST_WINDOW=%s BENCH_DOC=%s`, %s–%s UTC, commit %s (image and suite); %s CPUs (%s), %s RAM, %s; load average %s before, %s after.\n\n' \
    "$window" "$file" "$(date -u -d "@$began" '+%Y-%m-%d %H:%M')" "$(date -u -r bin/apicost.md '+%H:%M')" "$commit" \
    "$(nproc)" "$cpu_model" "$ram" "$(uname -sr)" "${load0//,/ }" "$(cut -d' ' -f1-3 /proc/loadavg)"
  cat bin/apicost.md
} | bin/benchdoc -file "$file" -block apicost
echo "wrote the apicost block of $file"
