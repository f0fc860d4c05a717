"""`sbx image pull|ls|rm|gc` and the streamed pull route:
POST /v1/sandbox/images/pull with `Accept: text/event-stream` streams
`progress` events then `done` (or `error`); without it the route stays a
JSON answer.  A real daemon and Debian's docker-registry on loopback; the
images are built here from busybox-static plus random bytes (imgworld.py),
so every image has a layer of its own to download.  Only 127.0.0.1 is
contacted."""
import json
import os
import pty
import subprocess

import pytest
import requests

import imgworld as w
from sbxtest import Daemon, reap_leftovers, sbx_bin, wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="images need root")


def image(size=3 << 20):
    """A busybox rootfs, then a layer of `size` random (incompressible)
    bytes: several MiB make the daemon report progress more than once."""
    return w.Image([w.rootfs_entries(), [("blob.bin", "file", os.urandom(size))]])


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    r = w.Registry(tmp_path_factory.mktemp("cliimgreg")).start()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def imgd(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("cliimgstate"))
    d.start()
    yield d
    rc = d.stop(timeout=15)
    assert not reap_leftovers(d.state_dir)
    assert rc == 0, d.log_tail(100)


@pytest.fixture(scope="module")
def keys(imgd):
    return {"admin": imgd.create_key("img-admin", admin=True),
            "user": imgd.create_key("img-user")}


@pytest.fixture
def sbx(imgd, keys):
    def run(*args, key="admin", timeout=120):
        env = dict(os.environ, SANDBOXD_URL=imgd.url, SANDBOXD_API_KEY=keys[key])
        env.pop("LANG", None)
        env.pop("LC_ALL", None)
        env.pop("LC_MESSAGES", None)
        return subprocess.run([sbx_bin(), "image", *args], capture_output=True, text=True,
                              timeout=timeout, env=env)
    return run


def sse_events(resp):
    """(event, data) pairs of an SSE response, in order."""
    out, event, data = [], None, None
    for line in resp.iter_lines(decode_unicode=True):
        if line == "":
            if event:
                out.append((event, json.loads(data) if data else None))
            event, data = None, None
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data = line[5:].strip()
    return out


def test_cli_pull_ls_rm_gc(sbx, registry):
    img = image()
    ref = registry.push(img, "cli/app:1")
    p = sbx("pull", ref)
    assert p.returncode == 0, p.stdout + p.stderr
    assert img.digest in p.stdout
    assert f"Pulled {ref}" in p.stdout
    # not a tty: one plain line per downloaded blob, the image's own layer
    # among them (the busybox layer may be stored already: shared, not fetched)
    lines = [l for l in p.stderr.splitlines() if "downloaded" in l]
    own = img.layer_digests()[-1]
    assert [l for l in lines if l.startswith(own + ":")] == [f"{own}: downloaded 3.1 MB"], p.stderr
    assert "\r" not in p.stderr and "\033[" not in p.stderr

    p = sbx("ls")
    assert p.returncode == 0, p.stderr
    head, *rows = p.stdout.splitlines()
    assert head.split() == ["REF", "DIGEST", "SIZE", "LAYERS"]
    row = [r.split() for r in rows if r.split()[0] == ref]
    assert row, p.stdout
    assert row[0][1] == img.digest.split(":")[1][:12]
    assert row[0][-1] == "2"

    p = sbx("ls", "--json")
    assert p.returncode == 0, p.stderr
    listed = {i["ref"]: i for i in json.loads(p.stdout)}
    assert listed[ref]["digest"] == img.digest

    # a second pull downloads nothing (no blob lines) and still succeeds
    p = sbx("pull", ref)
    assert p.returncode == 0 and img.digest in p.stdout, p.stderr
    assert "downloaded" not in p.stderr

    p = sbx("rm", ref)
    assert p.returncode == 0, p.stderr
    p = sbx("ls", "--json")
    assert ref not in [i["ref"] for i in json.loads(p.stdout)]
    p = sbx("rm", ref)
    assert p.returncode == 1 and "not_found" in p.stderr

    p = sbx("gc")
    assert p.returncode == 0, p.stderr
    p = sbx("gc", "--json")
    assert p.returncode == 0, p.stderr
    assert "blobs_removed" in json.loads(p.stdout)


def test_cli_pull_errors(sbx, registry):
    p = sbx("pull", "Bad Ref")
    assert p.returncode == 1 and "invalid_request" in p.stderr, p.stderr
    p = sbx("pull", f"{registry.host}/cli/absent:1")
    assert p.returncode == 1 and p.stderr.startswith("sbx: "), p.stderr
    p = sbx("pull", f"{registry.host}/cli/app:1", key="user")
    assert p.returncode == 1 and "forbidden" in p.stderr, p.stderr
    p = sbx("rm", f"{registry.host}/cli/app:1", key="user")
    assert p.returncode == 1 and "forbidden" in p.stderr, p.stderr
    p = sbx("pull")
    assert p.returncode == 2
    p = sbx("frobnicate")
    assert p.returncode == 2


def test_cli_pull_tty_bar(imgd, keys, registry):
    """On a terminal, stderr gets a redrawn bar with the total bytes."""
    img = image(6 << 20)
    ref = registry.push(img, "cli/tty:1")
    master, slave = pty.openpty()
    env = dict(os.environ, SANDBOXD_URL=imgd.url, SANDBOXD_API_KEY=keys["admin"])
    proc = subprocess.Popen([sbx_bin(), "image", "pull", ref], stdout=subprocess.PIPE,
                            stderr=slave, env=env)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    out, _ = proc.communicate(timeout=120)
    os.close(master)
    assert proc.returncode == 0, err
    assert img.digest.encode() in out
    text = err.decode(errors="replace")
    assert "downloaded" in text
    # a bar was drawn for the big layer (the daemon reports each MiB, ≤10/s)
    assert "\r\033[K" in text and "total" in text, text


def test_sse_pull_route(imgd, keys, registry):
    img = image(5 << 20)
    ref = registry.push(img, "cli/sse:1")
    h = {"Authorization": f"Bearer {keys['admin']}", "Accept": "text/event-stream"}
    with requests.post(imgd.url + "/v1/sandbox/images/pull", json={"ref": ref}, headers=h,
                       stream=True, timeout=120) as r:
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        events = sse_events(r)
    names = [e for e, _ in events]
    assert names[-1] == "done", names
    assert names.count("done") == 1 and "error" not in names
    assert set(names[:-1]) == {"progress"}, names
    assert events[-1][1] == {"ref": ref, "digest": img.digest}
    by_blob = {}
    for _, d in events[:-1]:
        assert set(d) == {"blob", "done", "total"}
        assert 0 < d["done"] <= d["total"]
        by_blob.setdefault(d["blob"], []).append(d)
    assert img.layer_digests()[-1] in by_blob  # the image's own layer (busybox's may be stored)
    for evs in by_blob.values():
        assert evs[-1]["done"] == evs[-1]["total"]  # the final one is always sent
        assert [e["done"] for e in evs] == sorted(e["done"] for e in evs)
    # the daemon reports each MiB, at most ~10 a second: a 5 MiB layer on
    # loopback gives between 1 and 6 events, never one per write
    assert 1 <= len(by_blob[img.layer_digests()[-1]]) <= 6
    assert ref in [i["ref"] for i in
                   requests.get(imgd.url + "/v1/sandbox/images", headers=h, timeout=30)
                   .json()["images"]]

    # a second streamed pull: nothing to download, just `done`
    with requests.post(imgd.url + "/v1/sandbox/images/pull", json={"ref": ref}, headers=h,
                       stream=True, timeout=120) as r:
        assert r.status_code == 200
        assert [e for e, _ in sse_events(r)] == ["done"]

    # without the Accept header: the JSON answer as before
    r = requests.post(imgd.url + "/v1/sandbox/images/pull", json={"ref": ref},
                      headers={"Authorization": h["Authorization"]}, timeout=120)
    assert r.status_code == 200 and r.json() == {"ref": ref, "digest": img.digest}


def test_sse_pull_refusals(imgd, keys, registry):
    url = imgd.url + "/v1/sandbox/images/pull"
    h = {"Authorization": f"Bearer {keys['admin']}", "Accept": "text/event-stream"}
    # validation comes before the stream: a plain JSON 400
    r = requests.post(url, json={"ref": "Bad Ref"}, headers=h, timeout=30)
    assert r.status_code == 400
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json()["error"]["code"] == "invalid_request"
    r = requests.post(url, json={"nope": 1}, headers=h, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"
    # a tenant key may not pull
    hu = dict(h, Authorization=f"Bearer {keys['user']}")
    r = requests.post(url, json={"ref": f"{registry.host}/cli/app:1"}, headers=hu, timeout=30)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    # a registry failure comes as an `error` event carrying the envelope's object
    with requests.post(url, json={"ref": f"{registry.host}/cli/absent:1"}, headers=h,
                       stream=True, timeout=120) as r:
        assert r.status_code == 200
        events = sse_events(r)
    assert [e for e, _ in events] == ["error"], events
    err = events[0][1]
    assert err["code"] and err["message"] and err["request_id"]


def test_sse_pull_client_gone(imgd, keys, registry):
    """A client that leaves mid-stream does not cancel the pull: the image
    is stored anyway and the daemon stays healthy."""
    img = image(8 << 20)
    ref = registry.push(img, "cli/gone:1")
    h = {"Authorization": f"Bearer {keys['admin']}", "Accept": "text/event-stream"}
    r = requests.post(imgd.url + "/v1/sandbox/images/pull", json={"ref": ref}, headers=h,
                      stream=True, timeout=120)
    assert r.status_code == 200
    r.close()
    wait_until(lambda: ref in [i["ref"] for i in requests.get(
        imgd.url + "/v1/sandbox/images", headers=h, timeout=30).json()["images"]], 60,
        interval=0.2, what="the pull to finish after the client left")
    assert requests.get(imgd.url + "/healthz", timeout=5).status_code == 200
