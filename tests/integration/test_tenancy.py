"""Cross-tenant isolation: bob cannot see, exec in, touch the files of,
delete or cancel alice's objects.  Every such request answers 404 with a
body identical in shape (and, ids aside, in text) to a missing id's, and
alice's objects are untouched afterwards."""
import pytest

from sbxtest import assert_error, marker, normalise_ids, sleeper, wait_until, workload_procs

MISSING_SES = "ses_" + "0" * 24
MISSING_EXE = "exe_" + "0" * 24


def session_routes(sid):
    return [
        ("GET", f"/v1/sandbox/sessions/{sid}", {}),
        ("PATCH", f"/v1/sandbox/sessions/{sid}", {"json": {"metadata": {"owner": "bob"}}}),
        ("POST", f"/v1/sandbox/sessions/{sid}/exec", {"json": {"command": ["true"]}}),
        ("PUT", f"/v1/sandbox/sessions/{sid}/files?path=/work/secret.txt", {"data": b"bob"}),
        ("GET", f"/v1/sandbox/sessions/{sid}/files?path=/work/secret.txt", {}),
        ("GET", f"/v1/sandbox/sessions/{sid}/files?path=/work&list=true", {}),
        ("DELETE", f"/v1/sandbox/sessions/{sid}/files?path=/work/secret.txt", {}),
        ("DELETE", f"/v1/sandbox/sessions/{sid}", {}),
    ]


def execution_routes(eid):
    return [
        ("GET", f"/v1/sandbox/executions/{eid}", {}),
        ("GET", f"/v1/sandbox/executions/{eid}?wait_s=0.2", {}),
        ("GET", f"/v1/sandbox/executions/{eid}/files?path=/work/out.txt", {}),
        ("POST", f"/v1/sandbox/executions/{eid}/cancel", {}),
    ]


def shape(r, real_id):
    e = r.json()["error"]
    return {
        "status": r.status_code,
        "keys": sorted(r.json()),
        "error_keys": sorted(e),
        "code": e["code"],
        "details": e["details"],
        "message": normalise_ids(e["message"].replace(real_id, "ID")),
        "en": normalise_ids(e["message_i18n"]["en"].replace(real_id, "ID")),
        "fr": normalise_ids(e["message_i18n"]["fr"].replace(real_id, "ID")),
        "content_type": r.headers.get("Content-Type"),
    }


@pytest.fixture
def alices_session(alice, profile):
    s = alice.new_session(profile, metadata={"owner": "alice"})
    assert alice.put(f"/v1/sandbox/sessions/{s['id']}/files?path=/work/secret.txt",
                     data=b"alice's secret").status_code == 201
    yield s
    alice.delete(f"/v1/sandbox/sessions/{s['id']}")


def test_sessions_are_invisible_to_other_tenants(alice, bob, alices_session):
    sid = alices_session["id"]
    for (method, path, kw), (_, missing_path, _) in zip(session_routes(sid),
                                                        session_routes(MISSING_SES)):
        r = bob.request(method, path, **kw)
        assert_error(r, 404, "not_found")
        m = bob.request(method, missing_path, **kw)
        assert_error(m, 404, "not_found")
        assert shape(r, sid) == shape(m, MISSING_SES), (method, path)
        # and in French
        rf = bob.with_lang("fr").request(method, path, **kw)
        mf = bob.with_lang("fr").request(method, missing_path, **kw)
        assert shape(rf, sid) == shape(mf, MISSING_SES), (method, path)
    # bob's list does not show it
    assert sid not in [s["id"] for s in bob.get("/v1/sandbox/sessions").json()["sessions"]]
    assert sid not in [s["id"] for s in bob.list_all("/v1/sandbox/sessions", "sessions")]
    # alice's session is untouched
    g = alice.get(f"/v1/sandbox/sessions/{sid}").json()
    assert g["status"] == "ready" and g["metadata"] == {"owner": "alice"}
    r = alice.get(f"/v1/sandbox/sessions/{sid}/files?path=/work/secret.txt")
    assert r.status_code == 200 and r.content == b"alice's secret"
    assert alice.exec(sid, command=["true"])["status"] == "succeeded"


def test_executions_are_invisible_to_other_tenants(alice, bob, profile):
    e = alice.new_execution(profile, command=["sh", "-c", "echo secret > out.txt"],
                            collect=["/work/out.txt"])
    eid = e["id"]
    alice.wait_execution(eid)
    for (method, path, kw), (_, missing_path, _) in zip(execution_routes(eid),
                                                        execution_routes(MISSING_EXE)):
        r = bob.request(method, path, **kw)
        assert_error(r, 404, "not_found")
        m = bob.request(method, missing_path, **kw)
        assert shape(r, eid) == shape(m, MISSING_EXE), (method, path)
    assert eid not in [x["id"] for x in bob.list_all("/v1/sandbox/executions", "executions")]
    f = alice.get(f"/v1/sandbox/executions/{eid}").json()
    assert f["status"] == "succeeded"
    assert alice.get(f"/v1/sandbox/executions/{eid}/files?path=/work/out.txt").content == \
        b"secret\n"


def test_other_tenant_cannot_cancel_running(daemon, alice, bob, any_profile):
    mark = marker()
    e = alice.new_execution(any_profile, command=sleeper(mark, 60))
    try:
        wait_until(lambda: workload_procs(daemon, mark), 20, what="alice's sleeper")
        assert_error(bob.post(f"/v1/sandbox/executions/{e['id']}/cancel"), 404, "not_found")
        assert alice.get(f"/v1/sandbox/executions/{e['id']}").json()["status"] == "running"
        assert workload_procs(daemon, mark)
    finally:
        alice.post(f"/v1/sandbox/executions/{e['id']}/cancel")


def test_other_tenant_cannot_delete_running_session(alice, bob, alices_session):
    sid = alices_session["id"]
    assert_error(bob.delete(f"/v1/sandbox/sessions/{sid}"), 404, "not_found")
    assert alice.get(f"/v1/sandbox/sessions/{sid}").json()["status"] == "ready"


def test_status_filter_is_scoped(alice, bob, any_profile):
    e = alice.new_execution(any_profile, command=["false"])
    alice.wait_execution(e["id"])
    failed = bob.list_all("/v1/sandbox/executions", "executions", status="failed")
    assert e["id"] not in [x["id"] for x in failed]


def test_admin_key_does_not_see_tenant_objects(admin, alices_session):
    """Admin keys are for admin routes; objects stay scoped by tenant."""
    assert_error(admin.get(f"/v1/sandbox/sessions/{alices_session['id']}"), 404, "not_found")
