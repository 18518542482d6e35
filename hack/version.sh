#!/usr/bin/env bash
# Prints the version of the checkout as SemVer with a leading "v", the form
# every artefact of a release carries (docs/releasing.md): the tag itself
# on a tagged commit (v0.2.0), `git describe`'s form after one
# (v0.2.0-3-gabc1234), v0.0.0-dev-g<commit> in a history without tags, and
# -dirty appended when the work tree has uncommitted changes.
set -euo pipefail
cd "$(dirname "$0")/.."
if v=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
  echo "$v"
elif c=$(git rev-parse --short=12 HEAD 2>/dev/null); then
  if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    echo "v0.0.0-dev-g$c-dirty"
  else
    echo "v0.0.0-dev-g$c"
  fi
else
  echo v0.0.0-dev
fi
