"""Bad input: malformed JSON, wrong types, unknown fields and profiles,
ceilings, huge bodies.  Each is a clear 4xx in the envelope (with
details.field for invalid_request), leaves nothing half-made, and the daemon
stays healthy."""
import uuid

import pytest

from sbxtest import assert_error, raw_http


@pytest.fixture(autouse=True)
def daemon_stays_healthy(daemon):
    yield
    assert daemon.alive(), "sandboxd died"
    assert daemon.healthy(), "sandboxd no longer answers /healthz"


@pytest.mark.parametrize("body", [
    b"{", b"not json", b"[1,2", b'{"profile": "process",}', b"\xff\xfe", b"",
    b'{"profile": "process"} trailing', b"[]", b'"a string"', b"42", b"null",
])
def test_malformed_json_session_create(alice, fresh_tenant, body):
    r = fresh_tenant.post("/v1/sandbox/sessions", data=body,
                          headers={"Content-Type": "application/json"})
    if body == b"":
        # an empty body may mean "all defaults"; it must not be a 5xx
        assert r.status_code in (201, 400, 503), r.text
        if r.status_code == 201:
            fresh_tenant.delete(f"/v1/sandbox/sessions/{r.json()['id']}")
        return
    assert_error(r, 400, "invalid_request")
    assert fresh_tenant.get("/v1/sandbox/sessions").json()["sessions"] == []


@pytest.mark.parametrize("path", ["/v1/sandbox/executions"])
@pytest.mark.parametrize("body", [b"{", b"[]", b"\x00\x01", b'{"command": ["true"]'])
def test_malformed_json_execution(fresh_tenant, path, body):
    r = fresh_tenant.post(path, data=body, headers={"Content-Type": "application/json"})
    assert_error(r, 400, "invalid_request")
    assert fresh_tenant.get("/v1/sandbox/executions").json()["executions"] == []


def test_malformed_json_exec_and_patch(alice, session):
    sid = session["id"]
    assert_error(alice.post(f"/v1/sandbox/sessions/{sid}/exec", data=b"{oops"), 400,
                 "invalid_request")
    assert_error(alice.patch(f"/v1/sandbox/sessions/{sid}", data=b"{oops"), 400,
                 "invalid_request")


SESSION_BAD = [
    ({"profile": 7}, "profile"),
    ({"profile": "process", "ttl_s": "10"}, "ttl_s"),
    ({"profile": "process", "ttl_s": -1}, "ttl_s"),
    ({"profile": "process", "ttl_s": 0}, "ttl_s"),
    ({"profile": "process", "limits": "big"}, "limits"),
    ({"profile": "process", "limits": {"memory": "lots"}}, "limits.memory"),
    ({"profile": "process", "limits": {"memory": -5}}, "limits.memory"),
    ({"profile": "process", "limits": {"memory": "64Ei"}}, "limits.memory"),
    ({"profile": "process", "limits": {"memory": "99999Gi"}}, "limits.memory"),
    ({"profile": "process", "limits": {"cpu": "lots"}}, "limits.cpu"),
    ({"profile": "process", "limits": {"cpu": "64"}}, "limits.cpu"),
    ({"profile": "process", "limits": {"pids": "many"}}, "limits.pids"),
    ({"profile": "process", "limits": {"pids": 10 ** 9}}, "limits.pids"),
    ({"profile": "process", "limits": {"timeout_s": 10 ** 9}}, "limits.timeout_s"),
    ({"profile": "process", "limits": {"bogus": 1}}, "limits.bogus"),
    ({"profile": "process", "env": ["A=1"]}, "env"),
    ({"profile": "process", "env": {"A": 1}}, "env.A"),
    ({"profile": "process", "env": {"1BAD": "x"}}, "env.1BAD"),
    ({"profile": "process", "metadata": "x"}, "metadata"),
    ({"profile": "process", "metadata": {"k": 5}}, "metadata.k"),
    ({"profile": "process", "network": "open"}, "network"),
    ({"profile": "process", "network": {"egress": "everything"}}, "network.egress"),
    ({"profile": "process", "network": {"egress": "allowlist", "allow": ["example.com"]}},
     "network.egress"),
    ({"profile": "process", "surprise": True}, "surprise"),
    ({"profile": "no-such-profile"}, "profile"),
]


@pytest.mark.parametrize("body,field", SESSION_BAD, ids=[f for _, f in SESSION_BAD])
def test_session_create_rejects(fresh_tenant, body, field):
    r = fresh_tenant.post("/v1/sandbox/sessions", json=body)
    assert_error(r, 400, "invalid_request", field=field)
    # nothing half-made
    assert fresh_tenant.get("/v1/sandbox/sessions").json()["sessions"] == []


def test_unavailable_profile_is_503(no_runsc):
    """gvisor on a daemon whose runsc is broken (its own daemon, so this
    holds whatever profiles the run tests)."""
    d = no_runsc.daemon
    c = d.client(d.create_key("t" + uuid.uuid4().hex[:12]))
    by = {p["name"]: p for p in c.get("/v1/sandbox/profiles").json()["profiles"]}
    assert by["gvisor"]["available"] is False
    e = assert_error(c.post("/v1/sandbox/sessions", json={"profile": "gvisor"}), 503,
                     "runtime_unavailable")
    assert "gvisor" in e["message"]
    assert_error(c.post("/v1/sandbox/executions",
                        json={"profile": "gvisor", "command": ["true"]}),
                 503, "runtime_unavailable")
    assert c.get("/v1/sandbox/sessions").json()["sessions"] == []
    assert c.get("/v1/sandbox/executions").json()["executions"] == []


EXEC_BAD = [
    ({}, "command"),
    ({"command": []}, "command"),
    ({"command": "echo hi"}, "command"),
    ({"command": [1, 2]}, "command[0]"),
    ({"command": ["echo", None]}, "command[1]"),
    ({"command": [""]}, "command[0]"),
    ({"command": ["a\u0000b"]}, ("command[0]", "body")),
    ({"command": ["true"], "language": "python", "code": "1"}, "command"),
    ({"command": ["true"], "code": "1"}, "code"),
    ({"language": "cobol", "code": "x"}, "language"),
    ({"language": "python"}, "code"),
    ({"language": "python", "code": 5}, "code"),
    ({"command": ["true"], "timeout_s": "5"}, "timeout_s"),
    ({"command": ["true"], "timeout_s": -1}, "timeout_s"),
    ({"command": ["true"], "timeout_s": 10 ** 9}, "timeout_s"),
    ({"command": ["true"], "stdin": 5}, "stdin"),
    ({"command": ["true"], "env": {"A": []}}, "env.A"),
    ({"command": ["true"], "cwd": 3}, "cwd"),
    ({"command": ["true"], "surprise": 1}, "surprise"),
]


@pytest.mark.parametrize("body,field", EXEC_BAD, ids=[f"{i}-{f}" for i, (_, f) in
                                                      enumerate(EXEC_BAD)])
def test_exec_rejects(alice, session, body, field):
    r = alice.post(f"/v1/sandbox/sessions/{session['id']}/exec", json=body)
    assert_error(r, 400, "invalid_request", field=field)


EXECUTION_BAD = [
    ({"command": []}, "command"),
    ({"command": ["true"], "files": "x"}, "files"),
    ({"command": ["true"], "files": [{"path": "/work/a"}]}, "files[0].content"),
    ({"command": ["true"], "files": [{"path": 1, "content": ""}]}, "files[0].path"),
    ({"command": ["true"], "files": [{"path": "/work/a", "content": "x", "encoding": "rot13"}]},
     "files[0].encoding"),
    ({"command": ["true"], "files": [{"path": "/work/a", "content": "***", "encoding": "base64"}]},
     "files[0].content"),
    ({"command": ["true"], "collect": "/work/*"}, "collect"),
    ({"command": ["true"], "collect": [5]}, "collect[0]"),
    ({"command": ["true"], "limits": {"memory": "lots"}}, "limits.memory"),
    ({"command": ["true"], "limits": {"output_bytes": "x"}}, "limits.output_bytes"),
    ({"command": ["true"], "network": {"egress": "allowlist"}}, "network.allow"),
    ({"command": ["true"], "network": {"egress": "allowlist", "allow": ["a..b"]}},
     "network.allow[0]"),
    ({"command": ["true"], "metadata": []}, "metadata"),
    ({"command": ["true"], "wat": 1}, "wat"),
]


@pytest.mark.parametrize("body,field", EXECUTION_BAD, ids=[f"{f}-{i}" for i, (_, f) in
                                                           enumerate(EXECUTION_BAD)])
def test_execution_create_rejects(fresh_tenant, any_profile, body, field):
    r = fresh_tenant.post("/v1/sandbox/executions", json=dict(body, profile=any_profile))
    assert_error(r, 400, "invalid_request", field=field)
    assert fresh_tenant.get("/v1/sandbox/executions").json()["executions"] == []


def test_execution_unknown_profile(fresh_tenant):
    r = fresh_tenant.post("/v1/sandbox/executions", json={"profile": "nope", "command": ["true"]})
    assert_error(r, 400, "invalid_request", field="profile")


@pytest.mark.parametrize("q", ["abc", "-1", "61", "nan", "1e9", ""])
def test_bad_wait_s(alice, q, any_profile):
    eid = alice.new_execution(any_profile, command=["true"])["id"]
    r = alice.get(f"/v1/sandbox/executions/{eid}?wait_s={q}")
    assert_error(r, 400, "invalid_request", field="wait_s")


@pytest.mark.parametrize("q", ["limit=0", "limit=-3", "limit=abc", "limit=100000"])
def test_bad_pagination(alice, q):
    for path in ("/v1/sandbox/sessions", "/v1/sandbox/executions"):
        r = alice.get(f"{path}?{q}")
        assert_error(r, 400, "invalid_request", field="limit")


def test_bad_status_filter(alice):
    assert_error(alice.get("/v1/sandbox/executions?status=sleepy"), 400, "invalid_request",
                 field="status")


def test_french_errors(no_runsc):
    # its own daemon with a broken runsc: gvisor is the 503 example
    alice = no_runsc.alice
    fr = alice.with_lang("fr")
    cases = [
        (fr.post("/v1/sandbox/sessions", json={"profile": "no-such"}), 400, "invalid_request"),
        (fr.get("/v1/sandbox/sessions/ses_000000000000000000000000"), 404, "not_found"),
        (fr.post("/v1/sandbox/sessions", json={"profile": "gvisor"}), 503,
         "runtime_unavailable"),
        (fr.post("/v1/sandbox/sessions", json={"profile": "process", "ttl_s": "x"}), 400,
         "invalid_request"),
    ]
    for r, status, code in cases:
        e = assert_error(r, status, code)
        assert e["message"] == e["message_i18n"]["fr"], e
        assert e["message_i18n"]["fr"] != e["message_i18n"]["en"], e
    # the same request in English (default, explicit, and with q-values)
    for lang in (None, "en", "en-GB,en;q=0.9", "de"):
        c = alice.with_lang(lang)
        e = assert_error(c.get("/v1/sandbox/sessions/ses_000000000000000000000000"), 404,
                         "not_found")
        assert e["message"] == e["message_i18n"]["en"], (lang, e)
    for lang in ("fr-FR", "fr-CA,fr;q=0.9,en;q=0.8", "de, fr"):
        c = alice.with_lang(lang)
        e = assert_error(c.get("/v1/sandbox/sessions/ses_000000000000000000000000"), 404,
                         "not_found")
        assert e["message"] == e["message_i18n"]["fr"], (lang, e)


def test_french_field_message_names_the_field(alice):
    r = alice.with_lang("fr").post("/v1/sandbox/sessions",
                                   json={"profile": "process", "limits": {"memory": "lots"}})
    e = assert_error(r, 400, "invalid_request", field="limits.memory")
    assert "limits.memory" in e["message"]


def _big_body_request(daemon, key, path, size, chunked=False):
    if chunked:
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        mb = b"a" * (1 << 20)
        chunk = f"{len(mb):x}\r\n".encode() + mb + b"\r\n"
        return raw_http(daemon.port, head, [chunk] * (size >> 20) + [b"0\r\n\r\n"])
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n")
    return raw_http(daemon.port, head, [b"a" * (1 << 20)] * (size >> 20))


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("path", ["/v1/sandbox/sessions", "/v1/sandbox/executions"])
def test_64mib_body_is_413(daemon, keys, path, chunked):
    status, body = _big_body_request(daemon, keys["alice"], path, 64 << 20, chunked)
    assert status == 413, (status, body[:300] if body else body)
    import json
    e = json.loads(body)["error"]
    assert e["code"] == "payload_too_large"
    assert daemon.healthy()


def test_64mib_file_upload_is_413(daemon, alice, session):
    sid = session["id"]
    head = (f"PUT /v1/sandbox/sessions/{sid}/files?path=/work/big HTTP/1.1\r\n"
            f"Host: 127.0.0.1\r\nAuthorization: Bearer {alice.key}\r\n"
            f"Content-Length: {64 << 20}\r\n\r\n")
    status, body = raw_http(daemon.port, head, [b"b" * (1 << 20)] * 64)
    assert status == 413, (status, body[:300] if body else body)
    assert daemon.healthy()
    r = alice.get(f"/v1/sandbox/sessions/{sid}/files?path=/work/big")
    assert r.status_code == 404, "a refused upload left a file behind"


def test_max_body_flag(daemon_factory):
    d = daemon_factory(extra_args=["--max-body", "1Mi"]).start()
    c = d.client(d.create_key("alice"))
    r = c.post("/v1/sandbox/executions", json={"profile": "process", "command": ["true"],
                                               "stdin": "x" * (2 << 20)})
    assert_error(r, 413, "payload_too_large")
    r = c.post("/v1/sandbox/executions", json={"profile": "process", "command": ["true"],
                                               "stdin": "x" * (512 << 10)})
    assert r.status_code == 202, r.text
    assert d.stop() == 0
