#!/usr/bin/env bash
# actions-pinned.sh: fails on an action in .github/workflows not pinned by
# commit, with its version as a comment (this repository's own workflows,
# ./..., aside).
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(grep -nE '^[[:space:]-]*uses:' .github/workflows/*.yml | grep -vE 'uses: *([^@ ]+@[0-9a-f]{40} +# v[0-9]|\./)' || true)
if [ -n "$bad" ]; then
  echo "actions must be pinned by commit, with the version as a comment:"
  echo "$bad"
  exit 1
fi
echo "every action is pinned by commit"
