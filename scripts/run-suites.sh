#!/usr/bin/env bash
# run-suites.sh — runs each `make` target named on the command line in
# turn (the suites of `make test`), timing each, and prints a table of
# per-suite wall times at the end, failed or not.  Stops at the first
# failing suite (its status is the script's) so CI fails fast.
set -uo pipefail
declare -a rows=()
total_start=$(date +%s)
status=0
for t in "$@"; do
  start=$(date +%s)
  echo "==== suite $t ===="
  make --no-print-directory "$t"
  rc=$?
  rows+=("$(printf '%-22s %5d s  %s' "$t" $(( $(date +%s) - start )) "$([ $rc -eq 0 ] && echo ok || echo "FAILED ($rc)")")")
  if [ $rc -ne 0 ]; then status=$rc; break; fi
done
echo "==== per-suite timings ===="
printf '%s\n' "${rows[@]}"
printf '%-22s %5d s\n' total $(( $(date +%s) - total_start ))
exit $status
