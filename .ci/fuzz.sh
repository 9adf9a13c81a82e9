#!/usr/bin/env bash
# Runs every fuzz target of the main module for a short, bounded time each
# (FUZZTIME, default 8s), beyond the seed corpora that ./test.sh already runs.
# A target is a "func FuzzName(" in a _test.go file; go test -fuzz takes one
# target per run, so each runs on its own. A failing input is left under the
# package's testdata/fuzz for the next run to replay.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-8s}"

count=0
while IFS=: read -r file name; do
  pkg="./$(dirname "$file")"
  echo "-- fuzz $pkg $name ($FUZZTIME)"
  timeout 300 go test -count=1 -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"
  count=$((count + 1))
done < <(git ls-files '*_test.go' | grep -v '^bench/\|^yaegitest/' |
  xargs grep -oH '^func Fuzz[A-Za-z0-9_]*' | sed 's/:func /:/' | sort -u)

if [ "$count" -eq 0 ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi
echo "fuzz: $count targets ran for $FUZZTIME each"
