"""Authentication: every route under /v1 answers 401 `unauthenticated`
without a valid key (missing, wrong, malformed), in the error envelope."""
import pytest

from sbxtest import Client, assert_error

FAKE_SES = "ses_000000000000000000000000"
FAKE_EXE = "exe_000000000000000000000000"

ROUTES = [
    ("GET", "/v1/sandbox/profiles", None),
    ("POST", "/v1/sandbox/sessions", {"profile": "process"}),
    ("GET", "/v1/sandbox/sessions", None),
    ("GET", f"/v1/sandbox/sessions/{FAKE_SES}", None),
    ("PATCH", f"/v1/sandbox/sessions/{FAKE_SES}", {"ttl_s": 10}),
    ("DELETE", f"/v1/sandbox/sessions/{FAKE_SES}", None),
    ("POST", f"/v1/sandbox/sessions/{FAKE_SES}/exec", {"command": ["true"]}),
    ("PUT", f"/v1/sandbox/sessions/{FAKE_SES}/files?path=/work/a", b"x"),
    ("GET", f"/v1/sandbox/sessions/{FAKE_SES}/files?path=/work/a", None),
    ("GET", f"/v1/sandbox/sessions/{FAKE_SES}/files?path=/work&list=true", None),
    ("DELETE", f"/v1/sandbox/sessions/{FAKE_SES}/files?path=/work/a", None),
    ("POST", "/v1/sandbox/executions", {"profile": "process", "command": ["true"]}),
    ("GET", "/v1/sandbox/executions", None),
    ("GET", f"/v1/sandbox/executions/{FAKE_EXE}", None),
    ("GET", f"/v1/sandbox/executions/{FAKE_EXE}/files?path=/work/a", None),
    ("POST", f"/v1/sandbox/executions/{FAKE_EXE}/cancel", None),
]

BAD_AUTH = {
    "missing": None,
    "wrong_key": "Bearer sbx_k0000000000000000_" + "0" * 64,
    "garbage_token": "Bearer not-a-key",
    "empty_bearer": "Bearer ",
    "basic_scheme": "Basic YWxpY2U6cGFzc3dvcmQ=",
    "no_scheme": None,  # filled in with a real key but without "Bearer"
}


def send(daemon, method, path, body, auth):
    c = Client(daemon.url, None)
    h = {} if auth is None else {"Authorization": auth}
    if isinstance(body, bytes):
        return c.request(method, path, headers=h, data=body)
    if body is not None:
        return c.request(method, path, headers=h, json=body)
    return c.request(method, path, headers=h)


@pytest.mark.parametrize("method,path,body", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
@pytest.mark.parametrize("kind", list(BAD_AUTH))
def test_unauthenticated(daemon, keys, method, path, body, kind):
    auth = BAD_AUTH[kind]
    if kind == "no_scheme":
        auth = keys["alice"]
    r = send(daemon, method, path, body, auth)
    assert_error(r, 401, "unauthenticated")


def test_tampered_key_is_refused(daemon, keys):
    k = keys["alice"]
    last = "0" if k[-1] != "0" else "1"
    r = send(daemon, "GET", "/v1/sandbox/sessions", None, "Bearer " + k[:-1] + last)
    assert_error(r, 401, "unauthenticated")


def test_valid_key_is_accepted(alice):
    assert alice.get("/v1/sandbox/sessions").status_code == 200


def test_unauthenticated_in_french(daemon):
    c = Client(daemon.url, None, lang="fr")
    e = assert_error(c.get("/v1/sandbox/sessions"), 401, "unauthenticated")
    assert e["message"] == e["message_i18n"]["fr"]
    assert e["message"] != e["message_i18n"]["en"]

