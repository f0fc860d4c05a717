#!/usr/bin/env bash
# test-deb.sh — the .deb as a user gets it: installed with dpkg (maintainer
# scripts and all) into a throwaway copy of this host's root — an overlay
# over / with a tmpfs upper, in private mount and network namespaces, so the
# host's own root, dpkg database and ports are never touched — then the
# service started with the unit's own ExecStart and StateDirectory, a key
# made with the installed CLI, a session run through the API, and the
# package removed and purged.  Usage: test-deb.sh PATH.deb   (root)
set -euo pipefail
deb=$(readlink -f "$1")
[ -f "$deb" ] || { echo "test-deb: no such package: $1" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "test-deb: needs root" >&2; exit 2; }

# Stage 1: private mount and network namespaces.  Stage 2 runs with the
# overlay as its root (pivot_root, not chroot: the kernel refuses to make
# user namespaces — every sandbox — from a chrooted process).
case "${SBX_TEST_DEB_STAGE:-}" in
"")
  t=$(mktemp -d /tmp/sandboxd-test-deb.XXXXXX)
  rc=0
  SBX_TEST_DEB_STAGE=1 SBX_TEST_DEB_DIR="$t" \
    unshare --mount --net --propagation private "$0" "$deb" || rc=$?
  rmdir "$t"
  exit $rc ;;
1)
  t=$SBX_TEST_DEB_DIR
  mount -t tmpfs -o size=2g sbx-test-deb "$t"
  mkdir "$t/upper" "$t/work" "$t/root"
  mount -t overlay sbx-test-deb-root -o "lowerdir=/,upperdir=$t/upper,workdir=$t/work" "$t/root"
  r="$t/root"
  mount --rbind /dev "$r/dev"
  mount --rbind /sys "$r/sys"
  mount -t proc proc "$r/proc"
  mount -t tmpfs tmpfs "$r/tmp"
  mount -t tmpfs tmpfs "$r/run"
  mkdir -p "$r/.oldroot"
  cp "$deb" "$r/tmp/"
  cp "$0" "$r/tmp/test-deb.sh"
  cd "$r"
  pivot_root . .oldroot
  umount -l /.oldroot
  exec env SBX_TEST_DEB_STAGE=2 /tmp/test-deb.sh "/tmp/$(basename "$deb")" ;;
esac

ip link set lo up
fail() { echo "test-deb: FAIL: $*" >&2; [ -f /tmp/serve.log ] && tail -30 /tmp/serve.log >&2; exit 1; }

dpkg -i "$deb" >/tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log >&2; fail "dpkg -i"; }
for f in /usr/bin/sandboxd /usr/bin/sbx /usr/libexec/sandboxd/sbx-init \
         /lib/systemd/system/sandboxd.service /etc/sandboxd/sandboxd.conf; do
  [ -e "$f" ] || fail "$f not installed"
done
grep -q '^Delegate=yes' /lib/systemd/system/sandboxd.service || fail "unit lacks Delegate=yes"

# What systemd would do: StateDirectory=sandboxd (mode 0700), then ExecStart.
unit=/lib/systemd/system/sandboxd.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
state=/var/lib/$(sed -n 's/^StateDirectory=//p' "$unit")
mkdir -p "$state" && chmod 0700 "$state"
# shellcheck disable=SC2086
$exec_start >/tmp/serve.log 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null || true' EXIT
base=http://127.0.0.1:8080   # the packaged config's listener, in this netns only
for _ in $(seq 1 300); do
  curl -fsS "$base/healthz" >/dev/null 2>&1 && break
  kill -0 $daemon 2>/dev/null || fail "the service exited"
  sleep 0.1
done
curl -fsS "$base/healthz" >/dev/null || fail "no /healthz within 30 s"

key=$(sandboxd key create --tenant deb-test --state-dir "$state") || fail "key create"
auth=(-H "Authorization: Bearer $key" -H 'Content-Type: application/json')
sid=$(curl -fsS "${auth[@]}" -d '{"profile":"container"}' "$base/v1/sandbox/sessions" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])') || fail "session create"
out=$(curl -fsS "${auth[@]}" -d '{"command":["sh","-c","echo packaged $((6*7)); id -u"]}' \
      "$base/v1/sandbox/sessions/$sid/exec") || fail "exec"
python3 - "$out" <<'PY' || fail "exec result: $out"
import json, sys
r = json.loads(sys.argv[1])
assert r["status"] == "succeeded", r
assert r["stdout"] == "packaged 42\n1000\n", r
PY
curl -fsS -X DELETE "${auth[@]}" "$base/v1/sandbox/sessions/$sid" >/dev/null || fail "session delete"
kill -TERM $daemon
wait $daemon || fail "the service did not exit 0 on SIGTERM"
trap - EXIT

dpkg -r sandboxd >/dev/null 2>&1 || fail "dpkg -r"
[ ! -e /usr/bin/sandboxd ] || fail "dpkg -r left /usr/bin/sandboxd"
[ -e /etc/sandboxd/sandboxd.conf ] || fail "dpkg -r removed the conffile (only purge may)"
dpkg -P sandboxd >/dev/null 2>&1 || fail "dpkg -P"
[ ! -e /etc/sandboxd/sandboxd.conf ] || fail "dpkg -P left the conffile"
echo "test-deb: ok ($(basename "$deb"): installed, served a session, removed, purged)"
