"""imgbench.py — issue 7's benchmark rows: the first pull of a ~50 MB image
from a registry on loopback, and session create on an OCI image already in
the store (warm) against the `host` pack, on one daemon, in alternating
batches.

The registry is Debian's `docker-registry` started by the tests' own
helper (tests/integration/imgworld.py) on a free 127.0.0.1 port; the image
is built here: busybox-static as the base layer, and on top a layer of
50 MiB of random bytes in 50 files (incompressible, so gzip does not shrink
it and the pull really moves ~50 MB), pushed with skopeo.  Only 127.0.0.1
is contacted."""
import os
import random
import subprocess
import sys
import time

from daemon import Daemon, Failed, first_line

HERE = os.path.dirname(os.path.abspath(__file__))
PAYLOAD_MIB = 50
PENDING = "image create: pending"


def _imgworld():
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
    import imgworld  # noqa: E402
    return imgworld


def big_image(imgworld, mib=PAYLOAD_MIB):
    """busybox base + a layer of mib MiB of random data in 1 MiB files.
    Seeded, so a rerun pushes the same bytes."""
    rnd = random.Random(20261202)
    files = [("data", "dir")]
    for i in range(mib):
        files.append(("data/blob%02d.bin" % i, "file", rnd.randbytes(1 << 20)))
    return imgworld.Image([imgworld.rootfs_entries(), files],
                          config={"Cmd": ["/bin/sh"], "WorkingDir": "/"})


class ImageWorld:
    """A registry on loopback holding the big image.  ref after start()."""

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "imgworld")
        self.reg = None
        self.ref = None
        self.size = 0

    def start(self):
        try:
            iw = _imgworld()
            img = big_image(iw)
            self.size = sum(len(b) for _, b, _ in img.layers)
            self.reg = iw.Registry(self.dir).start()
            self.ref = self.reg.push(img, "bench/big:v1")
        except (OSError, AssertionError, RuntimeError, TimeoutError, ImportError) as e:
            self.stop()
            raise Failed("registry/push: %s" % first_line(str(e)))
        return self

    def stop(self):
        if self.reg:
            self.reg.stop()
            self.reg = None


def pull(build, state, ref, timeout=300):
    """`sandboxd image pull REF --state-dir STATE`; wall time in µs."""
    t0 = time.perf_counter()
    r = subprocess.run([os.path.join(build, "sandboxd"), "image", "pull", ref,
                        "--state-dir", state], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, NO_PROXY="*", no_proxy="*"))
    dt = (time.perf_counter() - t0) * 1e6
    if r.returncode != 0:
        raise Failed("image pull: " + first_line(r.stderr or r.stdout, "exit %d" % r.returncode))
    return dt


def image_part(b, rounds=3):
    """Adds rows image.pull_first, image.pull_again, image.create,
    image.create_host to Bench b."""
    names = {
        "image.pull_first": ("first pull of a ~%d MB image from a loopback registry "
                             "(`sandboxd image pull`, empty store)" % PAYLOAD_MIB,
                             "sandboxd image pull 127.0.0.1:PORT/bench/big:v1 --state-dir <fresh>"),
        "image.pull_again": ("… the same pull again (store warm: one manifest request)",
                             "sandboxd image pull (same state dir)"),
        "image.create": ("session create on an OCI image, warm store (%d ms pause between)"
                         % 200, "apiloop create {\"profile\":\"container\",\"image\":REF}"),
        "image.create_host": ("session create on the `host` pack, same daemon, alternating "
                              "batches (200 ms pause between)",
                              "apiloop create {\"profile\":\"container\"}"),
    }
    if not isinstance(b.profiles.get("container"), dict):
        for k, (n, c) in names.items():
            b.fail(k, n, c, str(b.profiles.get("container")))
        return
    w = ImageWorld(b.tmp)
    try:
        w.start()
    except Failed as e:
        for k, (n, c) in names.items():
            b.fail(k, n, c, str(e))
        return
    b.facts["image.size_bytes"] = w.size
    try:
        # first pulls, each into an empty store
        firsts, again = [], []

        def first_pulls():
            for i in range(3):
                st = os.path.join(b.tmp, "pull-%d" % i)
                os.makedirs(st, exist_ok=True)
                firsts.append(pull(b.build, st, w.ref))
                again.append(pull(b.build, st, w.ref))
            return firsts
        b.row("image.pull_first", *names["image.pull_first"], first_pulls)
        if again:
            b.row("image.pull_again", *names["image.pull_again"], lambda: again)
        _create_rows(b, w, names, rounds)
    finally:
        w.stop()


def _create_rows(b, w, names, rounds):
    d = Daemon(b.build, b.tmp, "images")
    try:
        d.start()
        pull(b.build, d.state, w.ref)  # the store is warm before anything is timed
        body_img = '{"profile":"container","image":"%s"}' % w.ref
        body_host = '{"profile":"container"}'
        code, js = d.call("POST", "/v1/sandbox/sessions", {"profile": "container", "image": w.ref})
        if code != 201:
            msg = js.get("error", {}).get("message") if isinstance(js, dict) else js
            why = "%s (HTTP %d: %s)" % (PENDING, code, first_line(str(msg)))
            b.fail("image.create", names["image.create"][0], names["image.create"][1], why)
            b.facts["image.create_pending"] = why
        else:
            sid = js["id"]
            r = d.must("POST", "/v1/sandbox/sessions/%s/exec" % sid,
                       {"command": ["sh", "-c", "ls /data | wc -l; test -f /bin/busybox"]})
            d.call("DELETE", "/v1/sandbox/sessions/" + sid)
            if r.get("exit_code") != 0 or r.get("stdout", "").strip() != str(PAYLOAD_MIB):
                why = "%s (the session does not see the image: %s)" % (
                    PENDING, first_line(r.get("stdout", "") + r.get("stderr", "")))
                b.fail("image.create", names["image.create"][0], names["image.create"][1], why)
                b.facts["image.create_pending"] = why
        for _ in range(rounds):
            for key, body in (("image.create", body_img), ("image.create_host", body_host)):
                b.add_samples(key, *names[key], lambda: b.samples(
                    b.api(d, "-n", 15, "-w", 2, "-p", 200, "create", body)))
        b.finish_rows()
    except Failed as e:
        for k in ("image.create", "image.create_host"):
            if k not in b.rows or "failed" not in b.rows[k]:
                b.fail(k, names[k][0], names[k][1], str(e))
    finally:
        d.stop()
