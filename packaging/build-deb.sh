#!/usr/bin/env bash
# build-deb.sh — builds sandboxd's .deb with Debian's own tooling
# (dpkg-buildpackage + debhelper's meson build system) from the working
# tree: tracked files plus untracked ones git does not ignore, so what is
# packaged is what `git status` shows.  Usage: build-deb.sh [OUTDIR]
# (default build/deb).  Prints the path of the .deb.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build/deb}
version=$(dpkg-parsechangelog -l "$root/packaging/debian/changelog" -S Version)
work=$(mktemp -d /tmp/sandboxd-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
src="$work/sandboxd-$version"
mkdir -p "$src" "$out"
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
   xargs -0 cp --parents -a -t "$src" 2>/dev/null || true)
# Files deleted in the working tree but still tracked are skipped above.
ln -s packaging/debian "$src/debian"
(cd "$src" && dpkg-buildpackage -us -uc -b -j"$(nproc)" >"$work/build.log" 2>&1) || {
  tail -40 "$work/build.log" >&2
  echo "build-deb: dpkg-buildpackage failed" >&2
  exit 1
}
deb=$(ls "$work"/sandboxd_"$version"_*.deb)
mv "$deb" "$out/"
echo "$out/$(basename "$deb")"
