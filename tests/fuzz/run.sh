#!/usr/bin/env bash
# run.sh — `make fuzz`: runs each libFuzzer harness of BUILD (a -Dfuzz=true
# build dir) for SECONDS, starting from its checked-in corpus.  New corpus
# entries go to BUILD/fuzz-corpus/<name>/ (scratch: copy the ones worth
# keeping into tests/fuzz/corpus/<name>/), crashes, leaks and timeouts to
# tests/fuzz/crashes/<name>-*, the log to BUILD/fuzz-logs/<name>.log.
# Prints one line per harness: seconds, execs, cov, ft, corpus, findings.
#
#   tests/fuzz/run.sh BUILD SECONDS [NAME...]      (default: every harness)
set -u
build=$1 secs=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
# -max_len per parser: what a real input of that kind needs, a little more
# (a request head, a DNS query over UDP/TCP, a few tar entries, one link
# frame of the largest size, …).
declare -A MAXLEN=([router]=4096 [schema]=8192 [init_msg]=4200 [chan_reply]=4096
                   [archive]=65536 [image]=16384 [dns]=600 [sni]=16640 [policy]=4096
                   [link]=70000)
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(router schema init_msg chan_reply archive image dns sni policy link)
mkdir -p "$here/crashes" "$build/fuzz-logs"
# UBSan findings must stop the run like ASan's do.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
rc=0
printf '%-11s %6s %10s %6s %7s %6s  %s\n' harness secs execs cov ft corp findings
for n in "${names[@]}"; do
  bin=$build/tests/fuzz/fuzz_$n
  [ -x "$bin" ] || { echo "run.sh: $bin not built" >&2; rc=1; continue; }
  scratch=$build/fuzz-corpus/$n
  mkdir -p "$scratch"
  log=$build/fuzz-logs/$n.log
  before=$(ls "$here/crashes" | grep -c "^$n-" || true)
  start=$(date +%s)
  nice -n 10 "$bin" -max_total_time="$secs" -max_len="${MAXLEN[$n]}" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$here/crashes/$n-" \
    "$scratch" "$here/corpus/$n" >"$log" 2>&1 || rc=1
  took=$(($(date +%s) - start))
  after=$(ls "$here/crashes" | grep -c "^$n-" || true)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  printf '%-11s %6s %10s %6s %7s %6s  %s\n' "$n" "$took" "${execs:-?}" "${cov:-?}" "${ft:-?}" \
    "${corp:-?}" "$((after - before)) new in tests/fuzz/crashes"
done
exit $rc
