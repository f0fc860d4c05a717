"""Tools from tool manifests (docs/tools.md): POST /v1/manifests/apply,
GET|DELETE /v1/tools[/{name}], POST /v1/tools/{name}/invoke — applied all
or nothing and idempotently, tenant-scoped, invoked as real executions with
the input validated against the tool's own JSON Schema, hostile manifests
refused with every violation listed and nothing stored, a tenant's allowed
profiles enforced, every change audited."""
import json
import os
import uuid

import pytest

from sbxtest import assert_error

ADD = ("import json, os, sys; d = json.load(sys.stdin); "
       "print(d['a'] + d['b'], os.environ['SANDBOXD_TOOL'])")


def manifest(name, profile="container", **spec):
    body = {"sandbox_profile": profile, "image": "host",
            "command": ["python3", "-c", ADD],
            "input_schema": {"type": "object", "required": ["a", "b"],
                             "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
            "limits": {"memory": "128Mi", "timeout_s": 30}}
    body.update(spec)
    return {"apiVersion": "sandboxd/v1", "kind": "Tool",
            "metadata": {"name": name, "labels": {"team": "tests"}}, "spec": body}


def tool_name():
    return "t-" + uuid.uuid4().hex[:10]


def apply(c, docs, **params):
    body = {"items": docs} if isinstance(docs, list) else docs
    return c.post("/v1/manifests/apply", json=body, params=params)


def invoke(c, name, inp, **kw):
    return c.post(f"/v1/tools/{name}/invoke", json=dict(kw, input=inp))


def violations(r):
    assert r.status_code == 400, r.text
    return r.json()["error"]["details"]["violations"]


def test_apply_is_idempotent_and_versioned(alice):
    name = tool_name()
    r = apply(alice, manifest(name))
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["dry_run"] is False
    [one] = res["results"]
    assert (one["name"], one["action"]) == (name, "created")
    t = one["tool"]
    assert t["generation"] == 1 and t["profile"] == "container" and t["image"] == "host"
    assert t["digest"].startswith("sha256:") and len(t["digest"]) == 71
    assert t["manifest"] == manifest(name)
    # The same document (keys in another order): unchanged, same digest.
    again = json.loads(json.dumps(manifest(name), sort_keys=True))
    r = apply(alice, again)
    [one] = r.json()["results"]
    assert one["action"] == "unchanged" and one["tool"]["digest"] == t["digest"]
    assert one["tool"]["generation"] == 1
    # A change: updated, generation 2; a dry run reports without storing.
    changed = manifest(name, limits={"memory": "256Mi", "timeout_s": 30})
    r = apply(alice, changed, dry_run="true")
    [one] = r.json()["results"]
    assert r.json()["dry_run"] is True and one["action"] == "updated"
    assert alice.get(f"/v1/tools/{name}").json()["generation"] == 1
    r = apply(alice, changed)
    [one] = r.json()["results"]
    assert one["action"] == "updated" and one["tool"]["generation"] == 2
    g = alice.get(f"/v1/tools/{name}").json()
    assert g["generation"] == 2 and g["manifest"]["spec"]["limits"]["memory"] == "256Mi"
    assert g["created_at"] <= g["updated_at"]


def test_list_pages_in_name_order(fresh_tenant):
    c = fresh_tenant
    names = sorted(tool_name() for _ in range(5))
    r = apply(c, [manifest(n) for n in reversed(names)])
    assert r.status_code == 200, r.text
    assert [x["action"] for x in r.json()["results"]] == ["created"] * 5
    seen, cursor = [], None
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = c.get("/v1/tools", params=params).json()
        assert len(page["tools"]) <= 2
        seen += [t["name"] for t in page["tools"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == names
    assert_error(c.get("/v1/tools", params={"limit": 0}), 400, "invalid_request")


def test_invoke_runs_an_execution_with_the_input(alice):
    name = tool_name()
    assert apply(alice, manifest(name)).status_code == 200
    r = invoke(alice, name, {"a": 2, "b": 3.5}, metadata={"agent": "gw"})
    assert r.status_code == 202, r.text
    inv = r.json()
    assert inv["tool"] == name and inv["generation"] == 1 and inv["status"] == "queued"
    assert inv["profile"] == "container"
    assert r.headers["Location"] == f"/v1/sandbox/executions/{inv['id']}"
    f = alice.wait_execution(inv["id"])
    assert f["status"] == "succeeded", f
    assert f["stdout"] == f"5.5 {name}\n"
    assert f["metadata"] == {"agent": "gw", "tool": name, "tool_generation": "1"}


def test_language_and_entrypoint(alice):
    name = tool_name()
    m = manifest(name)
    del m["spec"]["command"], m["spec"]["input_schema"]
    m["spec"].update(language="python", entrypoint="/usr/lib/python3.11/this.py", timeout_s=20)
    del m["spec"]["limits"]["timeout_s"]
    r = apply(alice, m)
    assert r.status_code == 200, r.text
    f = alice.wait_execution(invoke(alice, name, None).json()["id"])
    assert f["status"] == "succeeded" and f["stdout"].startswith("The Zen of Python"), f


def test_timeout_comes_from_the_manifest(alice):
    name = tool_name()
    m = manifest(name, command=["sleep", "30"], limits={"memory": "64Mi"}, timeout_s=1)
    del m["spec"]["input_schema"]
    assert apply(alice, m).status_code == 200
    f = alice.wait_execution(invoke(alice, name, {}).json()["id"], timeout=30)
    assert f["status"] == "timeout", f


def test_input_is_validated_against_the_tools_schema(alice):
    name = tool_name()
    assert apply(alice, manifest(name)).status_code == 200
    before = len(alice.get("/v1/sandbox/executions", params={"limit": 200}).json()["executions"])
    vs = violations(invoke(alice, name, {"a": "two"}))
    paths = sorted(v["path"] for v in vs)
    assert paths == ["/input", "/input/a"], vs  # b missing; a not a number
    assert all(v["message"] == v["message_i18n"]["en"] for v in vs)
    fr = alice.with_lang("fr")
    r = invoke(fr, name, {"a": 1})
    vs = violations(r)
    assert vs[0]["message"] == vs[0]["message_i18n"]["fr"] != vs[0]["message_i18n"]["en"]
    assert r.json()["error"]["message"] == r.json()["error"]["message_i18n"]["fr"]
    assert r.json()["error"]["message"].startswith("entrée refusée : 1 violation")
    # No input at all is {} (b and a missing), not a way around the schema.
    r = alice.post(f"/v1/tools/{name}/invoke")
    assert [v["path"] for v in violations(r)] == ["/input", "/input"]
    assert_error(alice.post(f"/v1/tools/{name}/invoke", json={"input": {}, "cmd": "x"}), 400,
                 "invalid_request")
    assert_error(alice.post(f"/v1/tools/{name}/invoke", data=b"[1"), 400, "invalid_request")
    after = len(alice.get("/v1/sandbox/executions", params={"limit": 200}).json()["executions"])
    assert after == before, "a refused invoke queued an execution"


def test_delete(alice):
    name = tool_name()
    assert apply(alice, manifest(name)).status_code == 200
    r = alice.delete(f"/v1/tools/{name}")
    assert r.status_code == 204, r.text
    assert_error(alice.get(f"/v1/tools/{name}"), 404, "not_found")
    assert_error(alice.delete(f"/v1/tools/{name}"), 404, "not_found")
    assert_error(invoke(alice, name, {"a": 1, "b": 2}), 404, "not_found")
    # Applied again: a new tool, generation 1.
    [one] = apply(alice, manifest(name)).json()["results"]
    assert (one["action"], one["tool"]["generation"]) == ("created", 1)


def test_tools_are_the_tenants_own(alice, bob):
    name = tool_name()
    assert apply(alice, manifest(name)).status_code == 200
    assert_error(bob.get(f"/v1/tools/{name}"), 404, "not_found")
    assert_error(bob.delete(f"/v1/tools/{name}"), 404, "not_found")
    assert_error(invoke(bob, name, {"a": 1, "b": 2}), 404, "not_found")
    assert name not in [t["name"] for t in bob.get("/v1/tools").json()["tools"]]
    # The same name is bob's own tool, independent of alice's.
    [one] = apply(bob, manifest(name, command=["true"])).json()["results"]
    assert one["action"] == "created"
    assert alice.get(f"/v1/tools/{name}").json()["manifest"] == manifest(name)


def test_apply_is_all_or_nothing(alice):
    good, bad = tool_name(), tool_name()
    m_bad = manifest(bad)
    m_bad["spec"]["command"] = "not a list"
    vs = violations(apply(alice, [manifest(good), m_bad]))
    assert {v["index"] for v in vs} == {1}
    assert any(v["path"] == "/spec/command" for v in vs), vs
    assert_error(alice.get(f"/v1/tools/{good}"), 404, "not_found")
    # Two documents with one name.
    vs = violations(apply(alice, [manifest(good), manifest(good)]))
    assert [(v["index"], v["path"]) for v in vs] == [(1, "/metadata/name")]
    assert_error(alice.get(f"/v1/tools/{good}"), 404, "not_found")


def deep(n):
    v = {"type": "object"}
    for _ in range(n):
        v = {"type": "object", "properties": {"x": v}}
    return v


@pytest.mark.parametrize("case", [
    "unknown_profile", "ref_loop", "remote_ref", "dangling_ref", "limits_over_ceiling",
    "bad_image", "both_command_and_language", "unknown_field", "bad_name", "timeouts_disagree",
    "not_a_schema"])
def test_hostile_manifests_are_refused_with_their_violations(alice, case):
    name = tool_name()
    m = manifest(name)
    spec = m["spec"]
    want = {
        "unknown_profile": "/spec/sandbox_profile",
        "ref_loop": "/spec/input_schema",
        "remote_ref": "/spec/input_schema",
        "dangling_ref": "/spec/input_schema",
        "limits_over_ceiling": "/spec/limits/memory",
        "bad_image": "/spec/image",
        "both_command_and_language": "/spec",
        "unknown_field": "/spec",
        "bad_name": "/metadata/name",
        "timeouts_disagree": "/spec/timeout_s",
        "not_a_schema": "/spec/input_schema",
    }[case]
    if case == "unknown_profile":
        spec["sandbox_profile"] = "no-such-profile"
    elif case == "ref_loop":
        spec["input_schema"] = {"definitions": {"a": {"$ref": "#/definitions/b"},
                                                "b": {"$ref": "#/definitions/a"}},
                                "$ref": "#/definitions/a"}
    elif case == "remote_ref":
        spec["input_schema"] = {"$ref": "http://198.51.100.7/schema.json"}
    elif case == "dangling_ref":
        spec["input_schema"] = {"$ref": "#/definitions/nowhere"}
    elif case == "limits_over_ceiling":
        spec["limits"] = {"memory": "100Ti"}
    elif case == "bad_image":
        spec["image"] = "UPPER/CASE:::nope"
    elif case == "both_command_and_language":
        spec.update(language="python", entrypoint="/x.py")
    elif case == "unknown_field":
        spec["privileged"] = True
    elif case == "bad_name":
        m["metadata"]["name"] = "../etc"
    elif case == "timeouts_disagree":
        spec["timeout_s"] = 5
    elif case == "not_a_schema":
        spec["input_schema"] = {"type": "no-such-type"}
    vs = violations(apply(alice, m))
    assert any(v["path"].startswith(want) for v in vs), vs
    assert all(v["index"] == 0 and v["message_i18n"]["fr"] for v in vs)
    assert_error(alice.get(f"/v1/tools/{name}"), 404, "not_found")


def test_hostile_bodies(daemon, alice):
    name = tool_name()
    m = manifest(name)
    m["spec"]["input_schema"] = deep(100)
    assert_error(apply(alice, m), 400, "invalid_request")  # nests past 64 levels
    huge = manifest(name)
    huge["metadata"]["labels"] = {"pad": "x" * 1000}
    huge["spec"]["input_schema"]["description"] = "y" * (1 << 20)
    assert_error(apply(alice, huge), 413, "payload_too_large")
    assert_error(alice.post("/v1/manifests/apply", data=b"{\"kind\": "), 400, "invalid_request")
    assert_error(alice.post("/v1/manifests/apply", json={"items": []}), 400, "invalid_request")
    assert_error(apply(alice, [manifest(tool_name()) for _ in range(65)]), 400,
                 "invalid_request")
    assert_error(alice.post("/v1/manifests/apply", json=[manifest(name)]), 400, "invalid_request")
    # An input nesting past the validator's depth, and one over 1 MiB.
    assert apply(alice, manifest(name)).status_code == 200
    assert_error(invoke(alice, name, deep(100)), 400, "invalid_request")
    assert_error(invoke(alice, name, {"a": 1, "b": 2, "pad": "z" * (1 << 20)}), 413,
                 "payload_too_large")
    assert daemon.client(None).get("/healthz").status_code == 200


TENANT_CONFIG = """
[server]
allowed_profiles = container, process

[tenant.narrow]
profiles = process
"""


def test_a_tenants_allowed_profiles(daemon_factory, tmp_path):
    path = os.path.join(tmp_path, "sandboxd.conf")
    with open(path, "w") as f:
        f.write(TENANT_CONFIG)
    d = daemon_factory(extra_args=["--config", path]).start()
    narrow, wide = d.client(d.create_key("narrow")), d.client(d.create_key("wide"))
    admin = d.client(d.create_key("ops", admin=True))
    # Applying a tool in a profile the tenant may not use: 403, nothing stored.
    name = tool_name()
    r = apply(narrow, manifest(name, profile="container"))
    e = assert_error(r, 403, "forbidden")
    assert e["details"]["field"] == "spec.sandbox_profile" and "process" in e["message"]
    assert_error(narrow.get(f"/v1/tools/{name}"), 404, "not_found")
    r = apply(narrow, [manifest(tool_name(), profile="process"), manifest(name)])
    assert assert_error(r, 403, "forbidden")["details"]["field"] == "items[1].spec.sandbox_profile"
    # The same wall for sessions and executions.
    assert_error(narrow.post("/v1/sandbox/sessions", json={"profile": "container"}), 403,
                 "forbidden")
    assert_error(narrow.post("/v1/sandbox/executions",
                             json={"profile": "container", "command": ["true"]}), 403,
                 "forbidden")
    # What it may use works; [server]'s list holds for the other tenants.
    r = apply(narrow, manifest(name, profile="process"))
    assert r.status_code == 200, r.text
    f = narrow.wait_execution(invoke(narrow, name, {"a": 1, "b": 1}).json()["id"])
    assert f["status"] == "succeeded" and f["stdout"].startswith("2 "), f
    assert apply(wide, manifest(tool_name())).status_code == 200
    assert_error(wide.post("/v1/sandbox/sessions", json={"profile": "gvisor"}), 403, "forbidden")
    # The refusals are policy decisions in the audit log.
    denied = admin.get("/v1/audit", params={"action": "policy.denied", "limit": 50}).json()
    assert any(ev["outcome"] == "forbidden" for ev in denied["events"]), denied


def test_apply_invoke_and_delete_are_audited(daemon, alice, admin):
    name = tool_name()
    assert apply(alice, manifest(name)).status_code == 200
    inv = invoke(alice, name, {"a": 1, "b": 1}).json()
    assert alice.delete(f"/v1/tools/{name}").status_code == 204
    seen = {}
    for action in ("tool.apply", "tool.invoke", "tool.delete"):
        evs = admin.get("/v1/audit", params={"action": action, "limit": 200}).json()["events"]
        seen[action] = [ev for ev in evs if name in json.dumps(ev)]
        assert seen[action] and all(ev["outcome"] == "ok" for ev in seen[action]), (action, evs)
    assert any(ev["details"].get("status") == "queued" and ev["details"].get("id") == inv["id"]
               for ev in seen["tool.invoke"]), seen["tool.invoke"]
    assert apply(alice, manifest(name), dry_run="1").status_code == 200
    evs = admin.get("/v1/audit", params={"action": "tool.apply", "limit": 200}).json()["events"]
    assert any(ev["target"] == name and ev["details"].get("dry_run") is True for ev in evs)


def test_a_tenant_has_at_most_1000_tools(fresh_tenant):
    c = fresh_tenant
    for batch in range(16):
        docs = [manifest(f"q-{batch}-{i}", command=["true"]) for i in range(64)]
        for m in docs:
            del m["spec"]["input_schema"]
        docs = docs[:1000 - 64 * batch] if batch == 15 else docs
        r = apply(c, docs)
        assert r.status_code == 200, r.text
    m = manifest("one-too-many")
    e = assert_error(apply(c, m), 429, "quota_exceeded")
    assert e["details"] == {"limit": "tools", "value": 1000}
    # Updating one it has is not a new tool; deleting one makes room.
    m2 = manifest("q-0-0", command=["false"])
    assert apply(c, m2).status_code == 200
    assert c.delete("/v1/tools/q-0-1").status_code == 204
    assert apply(c, m).status_code == 200
