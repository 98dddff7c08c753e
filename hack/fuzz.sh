#!/usr/bin/env bash
# fuzz.sh FUZZ_TIME: fuzzes every Fuzz function of the daemon's module
# (./...), one after the other, FUZZ_TIME each. go test -list finds them, so
# a new fuzz target is fuzzed without a change here. A crash lands in its
# package's testdata/fuzz as a seed case, which go test then runs every time.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:?usage: fuzz.sh FUZZ_TIME}

# go test -list prints the names of each package, then "ok <package> ...".
if ! list=$(go test -list '^Fuzz' ./... 2>&1); then
  echo "$list"
  exit 1
fi
targets=() names=()
while read -r first second _; do
  case $first in
  Fuzz*) names+=("$first") ;;
  ok) for name in "${names[@]}"; do targets+=("$second $name"); done; names=() ;;
  esac
done <<<"$list"
if [ ${#targets[@]} = 0 ]; then
  echo "go test -list '^Fuzz' ./... found no fuzz target"
  exit 1
fi

for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "go test $pkg -run '^\$' -fuzz '^$name\$' -fuzztime $fuzztime"
  go test "$pkg" -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime"
done
