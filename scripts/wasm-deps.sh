#!/bin/sh
# Installs the engines of the `wasm` sandbox class -- Pyodide and
# quickjs-emscripten (sync release variant) -- at the versions pinned in
# scripts/wasm-deps/package-lock.json, into $PREFIX/node_modules
# (default /usr/local/lib/sandboxd/wasm/node_modules), with `npm ci`.
#
# Idempotent: does nothing (and needs no network) when every package of the
# lock file is already installed at its locked version. Everything the runner
# loads at run time is inside the npm packages, so the result works offline.
#
#   scripts/wasm-deps.sh [--check] [--prefix DIR]
#     --check   only report whether the install is up to date (exit 1 if not)
#
# Environment: SANDBOXD_WASM_PREFIX (same as --prefix).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
lockdir="$here/wasm-deps"
prefix=${SANDBOXD_WASM_PREFIX:-/usr/local/lib/sandboxd/wasm}
check=0
while [ $# -gt 0 ]; do
	case "$1" in
	--check) check=1 ;;
	--prefix) shift; prefix=$1 ;;
	--prefix=*) prefix=${1#--prefix=} ;;
	-h|--help) sed -n '2,14p' "$0"; exit 0 ;;
	*) echo "wasm-deps: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done

command -v node >/dev/null 2>&1 || { echo "wasm-deps: node not found (apt-get install nodejs)" >&2; exit 1; }

# Prints the packages of the lock that are missing or at another version.
stale() {
	node - "$lockdir/package-lock.json" "$prefix" <<'JS'
const fs = require('fs'), path = require('path');
const [lockFile, prefix] = process.argv.slice(2);
const lock = JSON.parse(fs.readFileSync(lockFile, 'utf8'));
let bad = 0;
for (const [p, meta] of Object.entries(lock.packages || {})) {
  if (!p.startsWith('node_modules/') || meta.dev || meta.optional) continue;
  let v = null;
  try { v = JSON.parse(fs.readFileSync(path.join(prefix, p, 'package.json'), 'utf8')).version; } catch {}
  if (v !== meta.version) { console.log(`${p.slice(13)}: want ${meta.version}, have ${v || 'none'}`); bad++; }
}
// The files the runner loads at run time.
for (const f of ['pyodide/pyodide.mjs', 'pyodide/pyodide.asm.js', 'pyodide/pyodide.asm.wasm',
                 'pyodide/python_stdlib.zip', 'pyodide/pyodide-lock.json',
                 '@jitl/quickjs-wasmfile-release-sync/dist/emscripten-module.wasm']) {
  if (!fs.existsSync(path.join(prefix, 'node_modules', f))) { console.log(`missing ${f}`); bad++; }
}
process.exit(bad ? 1 : 0);
JS
}

if out=$(stale); then
	echo "wasm-deps: up to date in $prefix/node_modules"
	exit 0
fi
if [ "$check" = 1 ]; then
	echo "wasm-deps: not up to date in $prefix/node_modules:" >&2
	printf '%s\n' "$out" >&2
	exit 1
fi

command -v npm >/dev/null 2>&1 || { echo "wasm-deps: npm not found (apt-get install npm)" >&2; exit 1; }
echo "wasm-deps: installing into $prefix/node_modules:"
printf '%s\n' "$out" | sed 's/^/  /'
mkdir -p "$prefix"
cp "$lockdir/package.json" "$lockdir/package-lock.json" "$prefix/"
npm ci --no-audit --no-fund --ignore-scripts --omit=dev --prefix "$prefix"
# Readable by the sandbox's (unprivileged) runner.
chmod -R a+rX "$prefix"
if out=$(stale); then
	echo "wasm-deps: installed"
else
	echo "wasm-deps: install incomplete:" >&2
	printf '%s\n' "$out" >&2
	exit 1
fi
