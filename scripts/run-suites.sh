#!/usr/bin/env bash
# run-suites.sh — runs each `make` target named on the command line in
# turn (the suites of `make test`), timing each, and prints a table of
# per-suite wall times at the end, failed or not.  Stops at the first
# failing suite (its status is the script's) so CI fails fast, and then
# repeats the lines that say what failed below the table: a CI that keeps
# only the tail of the output still names the failing check.
set -uo pipefail
declare -a rows=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT
total_start=$(date +%s)
status=0
for t in "$@"; do
  start=$(date +%s)
  echo "==== suite $t ===="
  # tee in a process substitution, not a pipeline: a daemon a suite leaves
  # holding its stdout must not keep this loop waiting for the pipe's end
  make --no-print-directory "$t" > >(tee "$log") 2>&1
  rc=$?
  rows+=("$(printf '%-22s %5d s  %s' "$t" $(( $(date +%s) - start )) "$([ $rc -eq 0 ] && echo ok || echo "FAILED ($rc)")")")
  if [ $rc -ne 0 ]; then status=$rc; break; fi
done
echo "==== per-suite timings ===="
printf '%s\n' "${rows[@]}"
printf '%-22s %5d s\n' total $(( $(date +%s) - total_start ))
if [ $status -ne 0 ]; then
  echo "==== what failed ===="
  grep -aE 'CHECK(_[A-Z]+)? failed|^FAILED |^ERROR |[0-9]+/[0-9]+ .* (FAIL|TIMEOUT) ' "$log" | tail -n 30
fi
exit $status
