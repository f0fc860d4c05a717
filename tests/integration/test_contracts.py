"""The JSON Schema contracts (docs/contracts.md): the tool-manifest schema
served as installed, and documents validated against it with every
violation listed — in English and French — and hostile documents (huge,
deeply nested, $ref loops, an unknown profile) answered clearly while the
daemon stays healthy."""
import copy
import json
import os

import pytest

from sbxtest import assert_error

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCHEMA = os.path.join(ROOT, "contracts", "v1", "tool-manifest.schema.json")

MANIFEST = {
    "apiVersion": "sandboxd/v1",
    "kind": "Tool",
    "metadata": {"name": "add-numbers", "labels": {"team": "tools"}},
    "spec": {
        "sandbox_profile": "process",
        "image": "host",
        "command": ["python3", "-c", "import sys; print(sys.stdin.read())"],
        "input_schema": {
            "type": "object",
            "required": ["a", "b"],
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        },
        "limits": {"cpu": "500m", "memory": "256Mi", "timeout_s": 30},
        "network": {"egress": "none"},
        "collect": ["out/*.json"],
        "timeout_s": 10,
    },
}


@pytest.fixture(autouse=True)
def daemon_stays_healthy(daemon):
    yield
    assert daemon.alive(), "sandboxd died"
    assert daemon.healthy(), "sandboxd no longer answers /healthz"


def validate(client, doc, raw=None, lang=None):
    headers = {"Content-Type": "application/json"}
    if lang:
        headers["Accept-Language"] = lang
    return client.post("/v1/contracts/tool-manifest/validate",
                       data=raw if raw is not None else json.dumps(doc), headers=headers)


def verdict(r):
    assert r.status_code == 200, r.text[:500]
    body = r.json()
    assert set(body) == {"valid", "violations"}, body
    assert body["valid"] == (body["violations"] == []), body
    for v in body["violations"]:
        assert set(v) == {"path", "message", "message_i18n"}, v
        assert v["message_i18n"]["en"] and v["message_i18n"]["fr"], v
    return body


def paths(body):
    return {v["path"] for v in body["violations"]}


def test_list_and_get_serve_the_installed_bytes(alice):
    r = alice.get("/v1/contracts")
    assert r.status_code == 200, r.text
    assert r.json() == {"contracts": ["tool-manifest"]}
    r = alice.get("/v1/contracts/tool-manifest")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("application/schema+json")
    with open(SCHEMA, "rb") as f:
        assert r.content == f.read()


def test_needs_a_key(daemon):
    from sbxtest import Client
    anon = Client(daemon.url, None)
    assert_error(anon.get("/v1/contracts"), 401, "unauthenticated")
    assert_error(anon.post("/v1/contracts/tool-manifest/validate", json=MANIFEST), 401,
                 "unauthenticated")


def test_valid_manifest(alice, bob):
    assert verdict(validate(alice, MANIFEST)) == {"valid": True, "violations": []}
    m = copy.deepcopy(MANIFEST)
    del m["spec"]["command"]
    m["spec"].update(language="python", entrypoint="main.py")
    assert verdict(validate(bob, m))["valid"] is True


def test_every_violation_listed(alice):
    m = copy.deepcopy(MANIFEST)
    m["apiVersion"] = "sandboxd/v2"
    del m["kind"]
    m["metadata"]["name"] = "Not_A_Label"
    m["spec"]["command"] = "python3 main.py"
    m["spec"]["limits"]["pids"] = 0
    m["spec"]["network"]["egress"] = "everything"
    m["spec"]["surprise"] = True
    body = verdict(validate(alice, m))
    assert body["valid"] is False
    want = {"", "/apiVersion", "/metadata/name", "/spec/command", "/spec/limits/pids",
            "/spec/network/egress", "/spec"}
    assert want <= paths(body), body
    kind = [v for v in body["violations"] if v["path"] == ""]
    assert any("kind" in v["message"] for v in kind), kind


def test_command_or_language_entrypoint(alice):
    m = copy.deepcopy(MANIFEST)
    m["spec"]["language"] = "python"
    body = verdict(validate(alice, m))
    assert body["valid"] is False and "/spec" in paths(body), body


def test_french(alice):
    m = copy.deepcopy(MANIFEST)
    del m["kind"]
    body = verdict(validate(alice, m, lang="fr"))
    v = body["violations"][0]
    assert v["message"] == v["message_i18n"]["fr"]
    assert "Propriété obligatoire manquante" in v["message"], v
    body = verdict(validate(alice, m))
    assert body["violations"][0]["message"] == body["violations"][0]["message_i18n"]["en"]


def test_unknown_contract_404(alice):
    assert_error(alice.get("/v1/contracts/nope"), 404, "not_found")
    assert_error(alice.post("/v1/contracts/nope/validate", json=MANIFEST), 404, "not_found")


@pytest.mark.parametrize("raw", [b"{", b"not json", b"", b"\xff\xfe", b'{"a":1} trailing'])
def test_not_json_400(alice, raw):
    assert_error(validate(alice, None, raw=raw), 400, "invalid_request")


def test_not_an_object_is_a_violation(alice):
    body = verdict(validate(alice, [1, 2]))
    assert body["valid"] is False and paths(body) == {""}, body


def test_deep_document_refused(alice):
    raw = b'{"apiVersion":' + b"[" * 10000 + b"]" * 10000 + b"}"
    e = assert_error(validate(alice, None, raw=raw), 400, "invalid_request")
    assert "64 levels" in e["message_i18n"]["en"], e
    m = copy.deepcopy(MANIFEST)
    deep = {}
    for _ in range(70):
        deep = {"properties": {"x": deep}}
    m["spec"]["input_schema"] = deep
    assert_error(validate(alice, m), 400, "invalid_request")


def test_huge_documents(alice):
    m = copy.deepcopy(MANIFEST)
    m["metadata"]["name"] = "a" * 200000
    m["spec"]["command"] = ["x"] * 20000
    m["spec"]["collect"] = ["y" * 5000] * 100
    body = verdict(validate(alice, m))
    assert {"/metadata/name", "/spec/command", "/spec/collect"} <= paths(body), \
        sorted(paths(body))
    m = copy.deepcopy(MANIFEST)
    m["spec"]["limits"]["memory"] = "9" * 300000
    assert verdict(validate(alice, m))["valid"] is False


def test_body_over_the_limit_413(alice):
    raw = b'{"x":"' + b"a" * (64 << 20) + b'"}'
    r = validate(alice, None, raw=raw)
    assert r.status_code == 413, r.status_code


@pytest.mark.parametrize("schema,where", [
    ({"$ref": "#"}, "/spec/input_schema"),
    ({"$ref": "#/definitions/a", "definitions": {"a": {"$ref": "#/definitions/b"},
                                                  "b": {"$ref": "#/definitions/a"}}},
     "/spec/input_schema"),
    ({"type": "object", "allOf": [{"$ref": "#"}]}, "/spec/input_schema"),
    ({"properties": {"a": {"$ref": "https://example.com/s.json"}}},
     "/spec/input_schema/properties/a/$ref"),
    ({"properties": {"a": {"$ref": "#/definitions/missing"}}},
     "/spec/input_schema/properties/a/$ref"),
])
def test_input_schema_ref_loops_and_remote_refs(alice, schema, where):
    m = copy.deepcopy(MANIFEST)
    m["spec"]["input_schema"] = schema
    body = verdict(validate(alice, m))
    assert body["valid"] is False, body
    assert any(v["path"].startswith(where) and "$ref" in v["message"]
               for v in body["violations"]), body


def test_input_schema_recursion_that_descends_is_fine(alice):
    m = copy.deepcopy(MANIFEST)
    m["spec"]["input_schema"] = {"type": "object",
                                 "properties": {"child": {"$ref": "#"}, "n": {"type": "integer"}}}
    assert verdict(validate(alice, m))["valid"] is True


def test_input_schema_checked_against_the_metaschema(alice):
    m = copy.deepcopy(MANIFEST)
    m["spec"]["input_schema"] = {"type": "objekt", "required": "a", "minLength": -1}
    body = verdict(validate(alice, m))
    assert body["valid"] is False
    got = paths(body)
    assert {"/spec/input_schema/type", "/spec/input_schema/required",
            "/spec/input_schema/minLength"} <= got, sorted(got)


def test_unknown_profile_is_a_violation(alice):
    m = copy.deepcopy(MANIFEST)
    m["spec"]["sandbox_profile"] = "no-such-profile"
    body = verdict(validate(alice, m, lang="fr"))
    assert paths(body) == {"/spec/sandbox_profile"}, body
    assert "no-such-profile" in body["violations"][0]["message_i18n"]["en"]
    assert "profil" in body["violations"][0]["message"]
