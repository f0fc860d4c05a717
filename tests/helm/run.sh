#!/usr/bin/env bash
# run.sh [BUILD_DIR] — make test-helm: renders deploy/helm/sandboxd with every
# value set of tests/helm/values (render.go: text/template + Debian's sprig,
# as Helm does; offline, GOPATH mode on /usr/share/gocode), checks that the
# chart refuses what it must, then validates everything (validate.mjs).
# Needs no C build; the network only for `npm ci`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(mkdir -p "${1:-$root/build}/helm" && cd "${1:-$root/build}/helm" && pwd)
chart=$root/deploy/helm/sandboxd
out=$build/rendered
rm -rf "$out" && mkdir -p "$out"

# Debian's Go packages (golang-github-masterminds-sprig-dev,
# golang-k8s-sigs-yaml-dev) are GOPATH sources: no module download.
export GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$build/gocache GOFLAGS= GOPROXY=off
go build -o "$build/render" "$here/render.go"

(cd "$here" && npm ci --no-audit --no-fund --silent)

render() { "$build/render" -chart "$chart" -name sbx -namespace sandboxd "$@"; }
for f in "$here"/values/*.yaml; do
  set_name=$(basename "$f" .yaml)
  render -f "$f" >"$out/$set_name.yaml"
  render -f "$f" -notes >"$out/$set_name.notes.txt"
  render -f "$f" -dump-values >"$out/$set_name.values.json"
done

# The chart refuses, with the message that names the fix: no database at all
# (a fleet shares one PostgreSQL), a short cluster secret, nothing enabled.
refuses() {
  local want=$1; shift
  local err
  if err=$(render "$@" 2>&1 >/dev/null); then
    echo "test-helm: rendering with $* succeeded; it must fail with \"$want\"" >&2; return 1
  fi
  grep -qF -- "$want" <<<"$err" || { echo "test-helm: expected \"$want\", got: $err" >&2; return 1; }
}
printf 'fleet:\n  clusterSecret: too-short\n' >"$build/short-secret.yaml"
printf 'sandbox:\n  enabled: false\n' >"$build/nothing.yaml"
refuses "postgresql.external.url (or postgresql.external.existingSecret, or postgresql.enabled) is required"
refuses "fleet.clusterSecret must be at least 32 bytes" -f "$here/values/minimal.yaml" -f "$build/short-secret.yaml"
refuses "nothing would serve the API" -f "$here/values/minimal.yaml" -f "$build/nothing.yaml"
echo "refusals: ok (no database, short cluster secret, nothing enabled)"

node "$here/validate.mjs" "$out"
