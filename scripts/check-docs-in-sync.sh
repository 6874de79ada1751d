#!/usr/bin/env bash
# docs/passes.md and docs/dialect.md are the reference generated from ODS
# (Passes.td, the dialect's .td files), checked in so they read on GitHub.
# This fails when either has drifted from the .td files it came from.
# Usage: scripts/check-docs-in-sync.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
cmake --build "$build" --target mlir-doc > /dev/null
status=0
for pair in MLAPasses:passes MLADialect:dialect; do
  generated="$build/docs/MLA/${pair%%:*}.md"
  checked_in="$src/docs/${pair##*:}.md"
  # The checked-in copy starts with a two-line "generated from" header.
  if ! diff -u <(tail -n +3 "$checked_in") "$generated"; then
    echo "docs/${pair##*:}.md is out of date: regenerate it with" >&2
    echo "  ninja -C build mlir-doc && (head -2 $checked_in; cat $generated) > new && mv new $checked_in" >&2
    status=1
  fi
done
[ $status -eq 0 ] && echo "docs/passes.md and docs/dialect.md match ODS"
exit $status
