"""sbx end to end against the real daemon (SANDBOXD_URL, SANDBOXD_API_KEY)."""
import json
import os
import subprocess

import pytest

from sbxtest import sbx_bin


@pytest.fixture
def sbx(daemon, keys):
    env = dict(os.environ, SANDBOXD_URL=daemon.url, SANDBOXD_API_KEY=keys["alice"])

    def run(*args, input=None, timeout=60, key=None):
        e = env if key is None else dict(env, SANDBOXD_API_KEY=key)
        return subprocess.run([sbx_bin(), *args], capture_output=True, text=True, input=input,
                              timeout=timeout, env=e)
    return run


def test_run_python(sbx, profile):
    r = sbx("run", "--profile", profile, "--lang", "python", "print(2+2)")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "4\n"


def test_run_python_default_profile(sbx, profile_table):
    default = [p for p in profile_table.values() if p["default"]][0]
    if not default["available"]:
        pytest.skip(f"default profile {default['name']} unavailable here")
    r = sbx("run", "--lang", "python", "print(2+2)")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "4\n"


def test_run_exit_code(sbx, profile):
    r = sbx("run", "--profile", profile, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert r.returncode == 7, r.stderr
    assert r.stdout == "out\n"
    assert "err" in r.stderr


def test_run_timeout_exit_124(sbx, profile):
    r = sbx("run", "--profile", profile, "--timeout", "1", "--", "sh", "-c", "echo a; sleep 20")
    assert r.returncode == 124, (r.returncode, r.stderr)
    assert r.stdout == "a\n"


def test_run_json(sbx, profile):
    r = sbx("run", "--profile", profile, "--json", "--", "echo", "hi")
    assert r.returncode == 0, r.stderr
    o = json.loads(r.stdout)
    assert o["status"] == "succeeded" and o["stdout"] == "hi\n"


def test_run_file_and_collect(sbx, profile, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("data-in\n")
    out = tmp_path / "out"
    r = sbx("run", "--profile", profile, "--file", f"{src}:/work/in.txt",
            "--collect", "/work/o/*", "--download", str(out), "--",
            "sh", "-c", "mkdir -p o && tr a-z A-Z < in.txt > o/res.txt")
    assert r.returncode == 0, r.stderr
    got = [p for p in out.rglob("res.txt")]
    assert got, list(out.rglob("*"))
    assert got[0].read_text() == "DATA-IN\n"


@pytest.fixture
def sbx_no_runsc(no_runsc):
    """sbx against a daemon whose gvisor profile is unavailable (broken runsc)."""
    env = dict(os.environ, SANDBOXD_URL=no_runsc.daemon.url, SANDBOXD_API_KEY=no_runsc.key)

    def run(*args, timeout=60):
        return subprocess.run([sbx_bin(), *args], capture_output=True, text=True,
                              timeout=timeout, env=env)
    return run


def test_run_unavailable_profile(sbx_no_runsc):
    r = sbx_no_runsc("run", "--profile", "gvisor", "--", "true")
    assert r.returncode == 125 or r.returncode == 1, (r.returncode, r.stderr)
    assert r.returncode != 0
    assert "unavailable" in r.stderr


def test_run_bad_key(sbx):
    r = sbx("run", "--", "true", key="sbx_nope")
    assert r.returncode == 1
    assert r.stderr.strip()


def test_usage_error_is_2(sbx):
    assert sbx("run").returncode == 2
    assert sbx("frobnicate").returncode == 2


def test_session_create_ls_exec_cp_rm(sbx, alice, profile, tmp_path):
    r = sbx("session", "create", "--profile", profile)
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    assert sid.startswith("ses_") and "\n" not in sid
    try:
        r = sbx("session", "ls")
        assert r.returncode == 0 and sid in r.stdout
        r = sbx("session", "ls", "--json")
        assert sid in [s["id"] for s in json.loads(r.stdout)]
        r = sbx("exec", sid, "--", "echo", "hi")
        assert r.returncode == 0, r.stderr
        assert r.stdout == "hi\n"
        r = sbx("exec", sid, "--", "sh", "-c", "exit 5")
        assert r.returncode == 5
        # cp local → session
        local = tmp_path / "up.bin"
        payload = os.urandom(4096)
        local.write_bytes(payload)
        r = sbx("cp", str(local), f"{sid}:/work/up.bin")
        assert r.returncode == 0, r.stderr
        got = alice.get(f"/v1/sandbox/sessions/{sid}/files?path=/work/up.bin")
        assert got.status_code == 200 and got.content == payload
        # session → local
        alice.exec(sid, command=["sh", "-c", "mkdir -p res && echo result > res/r.txt"])
        dest = tmp_path / "down.txt"
        r = sbx("cp", f"{sid}:/work/res/r.txt", str(dest))
        assert r.returncode == 0, r.stderr
        assert dest.read_text() == "result\n"
        # a directory tree, both ways
        tree = tmp_path / "tree"
        (tree / "a").mkdir(parents=True)
        (tree / "a" / "f.txt").write_text("deep")
        r = sbx("cp", str(tree), f"{sid}:/work/")
        assert r.returncode == 0, r.stderr
        assert alice.get(f"/v1/sandbox/sessions/{sid}/files?path=/work/tree/a/f.txt").content \
            == b"deep"
        back = tmp_path / "back"
        back.mkdir()
        r = sbx("cp", f"{sid}:/work/res", str(back))
        assert r.returncode == 0, r.stderr
        assert (back / "res" / "r.txt").read_text() == "result\n"
        # to stdout
        r = sbx("cp", f"{sid}:/work/res/r.txt", "-")
        assert r.returncode == 0 and r.stdout == "result\n"
        r = sbx("cp", f"{sid}:/work/missing", str(tmp_path / "x"))
        assert r.returncode == 1
    finally:
        r = sbx("session", "rm", sid)
    assert r.returncode == 0, r.stderr
    assert sid in r.stdout
    assert alice.get(f"/v1/sandbox/sessions/{sid}").json()["status"] == "terminated"
    r = sbx("exec", sid, "--", "true")
    assert r.returncode != 0


def test_session_rm_missing(sbx):
    r = sbx("session", "rm", "ses_000000000000000000000000")
    assert r.returncode == 1


def test_profiles(sbx, profile_table):
    r = sbx("profiles")
    assert r.returncode == 0, r.stderr
    for name in profile_table:
        assert name in r.stdout
    # each limit as DEFAULT/MAX
    c = profile_table["container"]
    row = [line for line in r.stdout.splitlines() if line.split()[:1] == ["container"]][0]
    assert f"{c['limits']['memory']}/{c['max_limits']['memory']}" in row, r.stdout
    assert f"{c['limits']['cpu']}/{c['max_limits']['cpu']}" in row, r.stdout
    assert "STATE" in r.stdout.splitlines()[0], r.stdout


def test_profiles_shows_unavailable(sbx_no_runsc):
    r = sbx_no_runsc("profiles")
    assert r.returncode == 0, r.stderr
    assert "gvisor" in r.stdout
    assert "unavailable" in r.stdout.lower() or "no" in r.stdout.lower()


def test_help(sbx):
    r = sbx("--help")
    assert r.returncode == 0 and "run" in r.stdout and "session" in r.stdout
