#!/usr/bin/env bash
# install-deps.sh — installs every Debian package sandboxd needs to build,
# test and benchmark. Idempotent; silent when nothing is missing.
set -euo pipefail

PACKAGES=(
  # build
  gcc make meson ninja-build pkg-config
  # libraries
  libmicrohttpd-dev libjansson-dev libsqlite3-dev libsodium-dev
  libcurl4-openssl-dev libseccomp-dev libarchive-dev libinih-dev
  libpq-dev  # the PostgreSQL store backend
  # JSON Schema contracts (src/core/jsonschema.cc): valijson (draft-07, header-only
  # C++) over nlohmann-json, compiled by g++; the test suite's draft7 cases in unit tests
  g++ libvalijson-dev nlohmann-json3-dev json-schema-test-suite
  # tests
  python3 python3-pytest python3-requests python3-yaml python3-jsonschema procps iproute2 util-linux
  postgresql  # the store tests and make test-integration-pg start a throw-away server
  # runtimes the default host image offers to sandboxed code
  bash nodejs
  # contexts: matplotlib figures come back as image/png (tests need it)
  python3-matplotlib
  # peers for the benchmark
  bubblewrap firejail runsc hyperfine wrk strace
  # issue 8: promtool checks the /metrics exposition (tests)
  prometheus
  # issue 5: egress policy (nftables through libnftables, rtnetlink through libmnl);
  # tests serve HTTPS with a self-signed certificate and a test DNS upstream
  nftables libnftables-dev libmnl-dev openssl libssl-dev curl python3-dnspython
  # issue 7: images (a real registry and skopeo in tests, mmdebstrap for image build,
  # busybox-static for the test images)
  docker-registry skopeo mmdebstrap busybox-static zlib1g-dev
  # the TypeScript SDK's compiler and the Python SDK's type check (make test-sdk;
  # Node itself is nodejs above)
  node-typescript mypy
  # the Go SDK (sdk/go: standard library only, built and tested offline)
  golang-go
  # make test-helm renders the chart with Go's text/template, sprig and
  # sigs.k8s.io/yaml as Helm does (tests/helm/render.go, GOPATH mode, offline)
  golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev
  # the Debian package (make deb) and its install test
  debhelper dpkg-dev
  # the Java SDK (make sdk-java): JDK 17's javac/jar and Debian's Jackson jars
  openjdk-17-jdk-headless libjackson2-databind-java
  # make fuzz: clang with libFuzzer and the sanitizer runtimes (tests/fuzz)
  clang-14 libclang-rt-14-dev
  # make format / format-check (.clang-format)
  clang-format
  # the host lab (tests/hosts/): QEMU and its virtiofsd (qemu-system-common)
  qemu-system-x86 qemu-system-common
  # the wasm driver's tests build WASI modules: clang --target=wasm32-wasi with
  # Debian's wasi-libc, its compiler runtime and lld (docs/wasm.md)
  wasi-libc libclang-rt-14-dev-wasm32 lld
  # the microvm driver's assets (scripts/microvm-assets.py, docs/microvm.md): mksquashfs
  # for the root filesystem image; gcc -static (above, libc6-dev) for tests/microvm's init
  squashfs-tools
)

# The microvm driver's kernel: Debian's cloud kernel, fetched (never installed)
# into the cache scripts/microvm-assets.py and the driver read.  Best effort
# and only when nothing is cached yet: the microvm driver is optional, and an
# offline host with a cached kernel must still install (make microvm-assets
# refreshes it when the archive has a newer one).
MICROVM_CACHE=${SANDBOXD_MICROVM_CACHE:-/var/cache/sandboxd/microvm}
fetch_microvm_kernel() {
  [ -e "$MICROVM_CACHE/kernels/bookworm-linux-image-cloud-amd64.current" ] && return 0
  if [ "$(id -u)" -ne 0 ] && ! mkdir -p "$MICROVM_CACHE" 2>/dev/null; then
    echo "install-deps: no microVM kernel in $MICROVM_CACHE (run as root to fetch it)" >&2
    return 0
  fi
  echo "install-deps: fetching the microVM kernel (linux-image-cloud-amd64) into $MICROVM_CACHE" >&2
  if ! /usr/bin/python3 "$(dirname "$0")/microvm-assets.py" kernel --cache "$MICROVM_CACHE" >/dev/null; then
    echo "install-deps: could not fetch the microVM kernel (no network?); the microvm driver" \
         "stays unavailable until scripts/microvm-assets.py kernel succeeds" >&2
  fi
  return 0
}

# The wasm engine's packages (Pyodide, QuickJS) from npm into
# /usr/local/lib/sandboxd/wasm, pinned by scripts/wasm-deps/package-lock.json;
# a no-op once they are there.  Without them the wasm profile still runs WASI
# modules and says python/javascript are unavailable.
install_wasm_packages() {
  if [ "$(id -u)" -ne 0 ]; then
    return 0
  fi
  "$(dirname "$0")/wasm-deps.sh" || echo "install-deps: the wasm engine's packages could not" \
    "be installed (scripts/wasm-deps.sh); python and javascript stay unavailable on wasm" >&2
}

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  fetch_microvm_kernel
  install_wasm_packages
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]} (run as root to install)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# A fresh machine can have empty apt lists: refresh them first.
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fetch_microvm_kernel
install_wasm_packages
