"""Egress allowlists on the gvisor driver (issues 5 and 6).

gVisor's netstack takes the interfaces of the netns the bundle names when
runsc starts (--network=sandbox), so an allowlisted gvisor sandbox gets its
netns (a holder process) and its veth before runsc runs; the nft rules, DNS
responder and proxy outside are the container driver's.  Same "internet"
(networld.py) and probe as test_network.py, against a daemon of its own
with the real runsc (conftest.py hides runsc from the suite's daemons).

The cases run again on microvm (test_microvm_network.py imports them with
a `wall` fixture of its own): everything a case needs of its driver is in
`wall`.

Only loopback and the test namespaces are ever contacted."""
import json
import os
from dataclasses import dataclass, field
import re
import subprocess
import time

import pytest

import imgworld
import networld
import test_network as tn
from conftest import REAL_RUNSC
from sbxtest import Daemon, assert_error, reap_leftovers, wait_until



@dataclass
class Wall:
    """The driver a module's cases run on: its profile, the environment
    its daemons need, and the state-dir subdirectory of its sandboxes."""
    profile: str
    env: dict
    state_subdir: str
    kill_env: dict = field(default_factory=dict)  # the kill -9 case's daemon, on top of env


@pytest.fixture(scope="module")
def wall():
    # a pool of one: an allowlisted session must never be handed a pooled
    # (network none) sandbox
    return Wall("gvisor", {"SANDBOXD_RUNSC": REAL_RUNSC, "SANDBOXD_GVISOR_POOL_SIZE": "1"},
                "gvisor", {"SANDBOXD_GVISOR_POOL_SIZE": "0"})


@pytest.fixture(scope="module")
def world():
    w = networld.NetWorld().start()
    yield w
    w.stop()
    assert not w.leftovers()


@pytest.fixture(scope="module")
def gnetd(world, wall, tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp(f"{wall.profile}netstate"), world.daemon_args(),
               env=dict(wall.env, SANDBOXD_RESOLVE=world.resolve_env()))
    d.start()
    yield d
    rc = d.stop(timeout=20)
    assert not reap_leftovers(d.state_dir)
    assert rc == 0, d.log_tail(100)
    tag = tn.net_tag(d)
    assert tag not in tn.nft_tables(), "the daemon's nft table outlived it"
    assert not [l for l in tn.links() if tag in l], "veths outlived the daemon"


@pytest.fixture(scope="module")
def cl(gnetd, wall):
    c = gnetd.client(gnetd.create_key("net-tenant"))
    c.wall = wall
    p = {x["name"]: x for x in c.get("/v1/sandbox/profiles").json()["profiles"]}[wall.profile]
    if not p["available"]:
        pytest.skip(f"{wall.profile} unavailable on this host: {p['reason']}")
    assert "egress_allowlist" in p["capabilities"], p
    return c


def allow(cl, *entries):
    return cl.new_session(cl.wall.profile,
                          network={"egress": "allowlist", "allow": list(entries)})


def holders(d):
    """The daemon's netns holders: its children running the daemon's own
    binary (forked, never exec'd) in a netns other than the daemon's."""
    me = d.proc.pid
    exe, netns = os.readlink(f"/proc/{me}/exe"), os.readlink(f"/proc/{me}/ns/net")
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            st = open(f"/proc/{pid}/stat").read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
            if (ppid == me and os.readlink(f"/proc/{pid}/exe") == exe
                    and os.readlink(f"/proc/{pid}/ns/net") != netns):
                out.append(int(pid))
        except OSError:
            continue
    return out


def running(pid):
    try:
        st = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return st[st.rindex(")") + 2:].split()[0] != "Z"


def test_none_reaches_nothing(cl, world):
    s = cl.new_session(cl.wall.profile)
    try:
        assert s["network"] == {"egress": "none"}
        res = tn.probe(cl, s["id"], ["tcp", world.A4, 80], ["udp", world.A4, 7],
                       ["tcp", world.A6, 80], ["resolve", "allowed.test.example"],
                       ["tcp", world.HOST4, world.host_port])
        for r in res:
            tn.refused_fast(r)
        assert tn.probe(cl, s["id"], ["ifaces"])[0]["data"] == ["lo"]
        assert not world.saw(s["id"])
    finally:
        cl.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_allowed_domain_http_https_and_sibling_refused(cl, world):
    s = allow(cl, "allowed.test.example")
    sid = s["id"]
    try:
        assert tn.probe(cl, sid, ["ifaces"])[0]["data"] == ["eth0", "lo"]
        r = cl.exec(sid, command=["cat", "/etc/resolv.conf"])
        assert "nameserver" in r["stdout"], r
        tn.put_cert(cl, sid, world)
        res = tn.probe(cl, sid,
                       ["resolve", "allowed.test.example"],
                       ["http", f"http://allowed.test.example/{sid}/proxied"],
                       ["http", f"http://allowed.test.example/{sid}/direct", None, False],
                       ["http", f"https://allowed.test.example/{sid}/tls", "/work/ca.pem"],
                       ["http", f"https://allowed.test.example/{sid}/tlsdirect", "/work/ca.pem",
                        False],
                       ["resolve", "sibling.test.example"],
                       ["http", f"http://sibling.test.example/{sid}/sib"],
                       ["tcp", world.A4, 80, f"GET /{sid}/sibdirect HTTP/1.1\r\n"
                        "Host: sibling.test.example\r\n\r\n"])
        assert res[0]["ok"] and res[0]["data"] == [world.A4], res[0]
        for r in res[1:5]:
            assert r["ok"] and r["data"]["status"] == 200, r
            assert json.loads(r["data"]["body"])["host"].startswith("allowed.test.example")
        assert json.loads(res[3]["data"]["body"])["sni"] == "allowed.test.example"
        tn.refused_fast(res[5])
        r = res[6]
        assert r["ok"] and r["data"]["status"] == 403 and r["ms"] < tn.FAST_MS, r
        r = res[7]
        assert r["ok"] and r["data"].startswith("HTTP/1.1 403") and r["ms"] < tn.FAST_MS, r
        assert not world.saw(f"{sid}/sib")
        r = cl.exec(sid, command=["curl", "-sS", "--cacert", "/work/ca.pem",
                                  f"https://allowed.test.example/{sid}/curl"])
        assert r["exit_code"] == 0, r
        assert json.loads(r["stdout"])["path"] == f"/{sid}/curl"
    finally:
        cl.delete(f"/v1/sandbox/sessions/{sid}")


def test_cidr_and_port_rules(cl, world):
    s = allow(cl, f"{world.B4}:7", f"[{world.B6}]:8")
    sid = s["id"]
    try:
        res = tn.probe(cl, sid,
                       ["tcp", world.B4, 7, f"{sid}-ok4\n"],
                       ["udp", world.B4, 7],
                       ["tcp", world.B4, 8],
                       ["tcp", world.B6, 8],
                       ["tcp", world.B6, 7],
                       ["tcp", world.A4, 7])
        assert res[0]["ok"] and "ok4" in res[0]["data"], res[0]
        assert res[1]["ok"], res[1]
        tn.refused_fast(res[2])
        assert res[2]["err"] == "ECONNREFUSED", res[2]   # a TCP RST, not a timeout
        assert res[3]["ok"], res[3]
        for r in res[4:]:
            tn.refused_fast(r)
    finally:
        cl.delete(f"/v1/sandbox/sessions/{sid}")


def test_patch_allowlist_to_none_cuts_and_back(cl, world):
    s = allow(cl, f"{world.B4}:7", "allowed.test.example")
    sid = s["id"]
    try:
        res = tn.probe(cl, sid, ["tcp", world.B4, 7],
                       ["http", f"http://allowed.test.example/{sid}/installing"])
        assert res[0]["ok"], res[0]
        assert res[1]["ok"] and res[1]["data"]["status"] == 200, res[1]
        r = cl.patch(f"/v1/sandbox/sessions/{sid}", json={"network": {"egress": "none"}})
        assert r.status_code == 200 and r.json()["network"] == {"egress": "none"}, r.text
        res = tn.probe(cl, sid, ["tcp", world.B4, 7],
                       ["http", f"http://allowed.test.example/{sid}/locked"],
                       ["http", f"http://allowed.test.example/{sid}/lockeddirect", None, False],
                       ["resolve", "allowed.test.example"])
        for r in res:
            if r["ok"]:
                assert r["data"]["status"] == 403, r
            assert r["ms"] < tn.FAST_MS, r
        assert not world.saw(f"{sid}/locked")
        # the link stayed: an allowlist again works
        r = cl.patch(f"/v1/sandbox/sessions/{sid}",
                     json={"network": {"egress": "allowlist", "allow": [f"{world.B4}:7"]}})
        assert r.status_code == 200, r.text
        assert tn.probe(cl, sid, ["tcp", world.B4, 7])[0]["ok"]
    finally:
        cl.delete(f"/v1/sandbox/sessions/{sid}")


def test_patch_none_to_allowlist_is_a_conflict(cl):
    s = cl.new_session(cl.wall.profile)
    sid = s["id"]
    try:
        r = cl.patch(f"/v1/sandbox/sessions/{sid}",
                     json={"network": {"egress": "allowlist", "allow": ["allowed.test.example"]}})
        assert_error(r, 409, "conflict")
        assert "at create" in r.json()["error"]["message"], r.text
        assert cl.get(f"/v1/sandbox/sessions/{sid}").json()["network"] == {"egress": "none"}
        assert tn.probe(cl, sid, ["ifaces"])[0]["data"] == ["lo"]
    finally:
        cl.delete(f"/v1/sandbox/sessions/{sid}")


def test_empty_allowlist_admits_nothing_then_opens(cl, world):
    s = allow(cl)
    sid = s["id"]
    try:
        tn.refused_fast(tn.probe(cl, sid, ["tcp", world.B4, 7])[0])
        r = cl.patch(f"/v1/sandbox/sessions/{sid}",
                     json={"network": {"egress": "allowlist", "allow": [f"{world.B4}:7"]}})
        assert r.status_code == 200, r.text
        assert tn.probe(cl, sid, ["tcp", world.B4, 7])[0]["ok"]
    finally:
        cl.delete(f"/v1/sandbox/sessions/{sid}")


def test_executions_honour_their_policy(cl, world):
    tok = f"gvexe{time.monotonic_ns()}"
    code = (f"import urllib.request\n"
            f"print(urllib.request.urlopen('http://allowed.test.example/{tok}', "
            f"timeout=8).status)\n")
    r = cl.post("/v1/sandbox/executions",
                json={"profile": cl.wall.profile, "language": "python", "code": code,
                      "network": {"egress": "allowlist", "allow": ["allowed.test.example"]}})
    assert r.status_code in (200, 201, 202), r.text
    e = cl.wait_execution(r.json()["id"])
    assert e["status"] == "succeeded" and e["stdout"].strip() == "200", e
    assert world.saw(tok)


def test_nothing_left_after_delete(cl, gnetd, world):
    tag = tn.net_tag(gnetd)
    base = set(holders(gnetd))
    sids = [allow(cl, "allowed.test.example", f"{world.B4}:7")["id"] for _ in range(3)]
    assert len(set(holders(gnetd)) - base) == 3
    assert len([l for l in tn.links() if tag in l]) == 3
    for sid in sids:
        assert tn.probe(cl, sid, ["tcp", world.B4, 7])[0]["ok"]
        assert cl.delete(f"/v1/sandbox/sessions/{sid}").status_code in (200, 204)
    assert not set(holders(gnetd)) - base
    assert not [l for l in tn.links() if tag in l]
    table = subprocess.run(["nft", "list", "table", "inet", f"sandboxd_{tag}"],
                           capture_output=True, text=True).stdout
    assert not re.search(r"chain sbx_\d+", table), table[:2000]
    assert not re.search(r"set \w+_\d+", table), table[:2000]
    mounts = open("/proc/self/mounts").read()
    for sid in sids:
        assert sid not in mounts
        assert not os.path.exists(os.path.join(gnetd.state_dir, cl.wall.state_subdir, sid))


def test_killed_daemon_leaves_nothing_after_restart(world, wall, tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp(f"{wall.profile}netkill"), world.daemon_args(),
               env=dict(wall.env, SANDBOXD_RESOLVE=world.resolve_env(), **wall.kill_env))
    d.start()
    try:
        c = d.client(d.create_key("net-kill"))
        c.wall = wall
        sid = allow(c, f"{world.B4}:7")["id"]
        assert tn.probe(c, sid, ["tcp", world.B4, 7])[0]["ok"]
        tag = tn.net_tag(d)
        held = holders(d)
        assert len(held) == 1 and [l for l in tn.links() if tag in l]
        d.kill9()
        # its socketpair's daemon end is gone: the holder ends by itself
        wait_until(lambda: not any(running(p) for p in held), 10, interval=0.1,
                   what="the holders to end")
        d.start()  # recovery: cgroups, bundles, veths, nft table of the last run
        assert not holders(d)
        assert not [l for l in tn.links() if tag in l]
        assert not os.listdir(os.path.join(d.state_dir, wall.state_subdir))
    finally:
        rc = d.stop(timeout=20)
        left = reap_leftovers(d.state_dir)
    assert not left and rc == 0, d.log_tail(60)


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    r = imgworld.Registry(tmp_path_factory.mktemp("netreg")).start()
    yield r
    r.stop()


def test_image_session_with_allowlist(cl, world, registry):
    """An OCI image root (gvisor: an overlay the daemon mounts on the host,
    under runsc in its own mount namespace; microvm: a squashfs on the
    guest's disk) with an allowlist: the image's resolv.conf is ours, its
    busybox wget gets through the proxy, and the delete leaves nothing."""
    ref = registry.push(imgworld.Image([imgworld.rootfs_entries()]), f"tests/{cl.wall.profile}net:1")
    s = cl.new_session(cl.wall.profile, image=ref,
                       network={"egress": "allowlist", "allow": ["allowed.test.example"]})
    sid = s["id"]
    try:
        r = cl.exec(sid, command=["/bin/busybox", "cat", "/etc/resolv.conf"])
        assert "nameserver" in r["stdout"], r
        r = cl.exec(sid, command=["/bin/busybox", "wget", "-q", "-O-",
                                  f"http://allowed.test.example/{sid}/image"], timeout_s=30)
        assert r["exit_code"] == 0 and f"/{sid}/image" in r["stdout"], r
        r = cl.exec(sid, command=["/bin/busybox", "wget", "-q", "-O-",
                                  f"http://sibling.test.example/{sid}/imgsib"], timeout_s=30)
        assert r["exit_code"] != 0, r
        assert world.saw(f"{sid}/image") and not world.saw(f"{sid}/imgsib")
    finally:
        cl.delete(f"/v1/sandbox/sessions/{sid}")
    assert sid not in open("/proc/self/mountinfo").read()
