#!/usr/bin/env bash
# check_packages.sh — the SDKs install as packages, offline, the way the
# docs say, and import from outside the source tree:
#   * Python: `pip install --no-build-isolation --no-index ./sdk/python`
#     into a fresh venv (Debian's pip, setuptools and wheel), then the
#     import and the typed marker;
#   * TypeScript: `npm pack` (prepack runs tsc), then `npm install --offline`
#     of the tarball into an empty project, then the ESM import and the
#     .d.ts in the package;
#   * Go: a module outside the tree that requires
#     github.com/sandboxd/sandboxd/sdk/go, replaced by sdk/go, builds and
#     runs with no module proxy (tests/sdk/go.sh; its caches under
#     SANDBOXD_BUILD, default build/).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PY="${PYTHON:-/usr/bin/python3}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

"$PY" -m venv --system-site-packages "$TMP/venv"  # Debian's setuptools and wheel
"$TMP/venv/bin/pip" install -q --no-build-isolation --no-index "$ROOT/sdk/python" \
  >"$TMP/pip.log" 2>&1 || { cat "$TMP/pip.log"; exit 1; }
(cd "$TMP" && "$TMP/venv/bin/python" - <<'PYEOF'
import os, sandboxd
assert "/venv/" in sandboxd.__file__, sandboxd.__file__
assert os.path.exists(os.path.join(os.path.dirname(sandboxd.__file__), "py.typed"))
from sandboxd import Client
c = Client(base_url="http://127.0.0.1:9", api_key="k")
print("python package ok:", sandboxd.__version__, sandboxd.__file__)
PYEOF
)

cd "$ROOT/sdk/typescript"
TGZ="$(npm pack --silent --pack-destination "$TMP" 2>"$TMP/pack.log" | tail -1)" \
  || { cat "$TMP/pack.log"; exit 1; }
tar -tzf "$TMP/$TGZ" > "$TMP/contents"
grep -qx 'package/dist/index.d.ts' "$TMP/contents"
grep -qx 'package/dist/index.js' "$TMP/contents"
if grep -q '^package/src/' "$TMP/contents"; then
  echo "the package ships its sources" >&2; exit 1
fi
mkdir "$TMP/app"
cd "$TMP/app"
echo '{"name":"app","version":"1.0.0","type":"module","private":true}' > package.json
npm install --offline --no-audit --no-fund --silent "$TMP/$TGZ" >"$TMP/npm.log" 2>&1 \
  || { cat "$TMP/npm.log"; exit 1; }
node -e 'import("@sandboxd/sdk").then((m) => { new m.Client({ baseUrl: "http://127.0.0.1:9", apiKey: "k" });
  console.log("typescript package ok:", m.VERSION, Object.keys(m.ROUTES).length, "routes"); })'

mkdir "$TMP/goapp"
printf '%s\n' 'module example.com/goapp' '' 'go 1.19' '' \
  'require github.com/sandboxd/sandboxd/sdk/go v0.1.0' '' \
  "replace github.com/sandboxd/sandboxd/sdk/go => $ROOT/sdk/go" > "$TMP/goapp/go.mod"
cat > "$TMP/goapp/main.go" <<'GOEOF'
package main

import (
	"fmt"

	sandboxd "github.com/sandboxd/sandboxd/sdk/go"
)

func main() {
	c, err := sandboxd.NewClient(sandboxd.WithBaseURL("http://127.0.0.1:9"), sandboxd.WithAPIKey("k"))
	if err != nil {
		panic(err)
	}
	fmt.Println("go module ok:", sandboxd.Version, c.BaseURL())
}
GOEOF
GO_WORKDIR="$TMP/goapp" "$ROOT/tests/sdk/go.sh" "${SANDBOXD_BUILD:-$ROOT/build}" run .
