#!/usr/bin/env bash
# make lint-workflows: actionlint (pinned in hack/tools/actionlint) on
# .github/workflows, and every `make TARGET` a workflow runs must be a
# target of the Makefile, since the workflows cannot run here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$(hack/tool.sh actionlint)" -no-color .github/workflows/*.yml
status=0
targets=$(grep -ohE '(^|[[:space:];&|])make +[a-z][a-z0-9-]*' .github/workflows/*.yml | awk '{print $NF}' | sort -u)
[ -n "$targets" ] || { echo "lint-workflows: the workflows run no make target"; exit 1; }
for t in $targets; do
  if ! grep -qE "^$t:" Makefile; then
    echo "lint-workflows: .github/workflows run 'make $t', which the Makefile does not define"
    status=1
  fi
done
[ $status = 0 ] && echo "lint-workflows: $(ls .github/workflows/*.yml | wc -l) workflows pass actionlint; make targets they run exist: $(echo $targets)"
exit $status
