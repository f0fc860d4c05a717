#!/usr/bin/env bash
# go.sh BUILD_DIR [check | GO_ARGS...] — Debian's go on the Go SDK
# (sdk/go), offline and writing nothing outside BUILD_DIR/go: GOPATH and
# GOCACHE live there (kept between runs, so only the first run compiles
# the standard library), no module proxy or checksum database (the module
# has no dependencies), no toolchain download, no VCS stamping.
#   go.sh build check            gofmt, go vet, go test (make test-sdk)
#   go.sh build run ./e2e/record the same `go` with any arguments, in sdk/go
#                                (or in $GO_WORKDIR)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [check | GO_ARGS...]" >&2; exit 2; }
GODIR="$(realpath -m "$1")/go"
shift
command -v go >/dev/null || { echo "go missing (Debian's golang-go: scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$GODIR"
export GOPATH="$GODIR/path" GOCACHE="$GODIR/cache" GOMODCACHE="$GODIR/path/pkg/mod" \
  GOENV=off GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local GOTELEMETRY=off GO111MODULE=on \
  GOFLAGS=-buildvcs=false
cd "${GO_WORKDIR:-$ROOT/sdk/go}"
if [ "${1:-}" = check ]; then
  unformatted="$(gofmt -l .)"
  [ -z "$unformatted" ] || { echo "gofmt would change: $unformatted" >&2; exit 1; }
  go vet ./...
  exec go test -count=1 ./...
fi
exec go "$@"
