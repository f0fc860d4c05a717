#!/usr/bin/env bash
# dev-run.sh BUILD STATE LISTEN — `make run`: a development daemon with a
# ready API key.  The key is created once and kept in STATE/dev-api-key
# (mode 0600), so restarting keeps your shell's SANDBOXD_API_KEY valid.
# Extra daemon flags: SANDBOXD_FLAGS="--enable-unsafe-process-driver" make run
set -euo pipefail
build=$1 state=$2 listen=$3
mkdir -p "$state"
chmod 700 "$state"
keyfile="$state/dev-api-key"
if [ ! -s "$keyfile" ]; then
  (umask 077; "$build/sandboxd" key create --tenant dev --state-dir "$state" >"$keyfile")
fi
key=$(cat "$keyfile")
url="http://$listen"
cat <<MSG

  sandboxd is starting on $url   (state in $state; Ctrl-C stops it)

  In another terminal:

    export SANDBOXD_URL=$url
    export SANDBOXD_API_KEY=$key
    $build/sbx run --lang python 'print(2+2)'
    $build/sbx profiles

  or with curl:

    curl -s -H "Authorization: Bearer $key" $url/v1/sandbox/profiles

MSG
exec "$build/sandboxd" serve --listen "$listen" --state-dir "$state" ${SANDBOXD_FLAGS:-}
