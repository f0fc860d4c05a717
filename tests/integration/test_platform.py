"""Platform routes: /healthz, /readyz, /v1/sandbox/profiles, request ids,
unknown routes and methods."""
from sbxtest import assert_error


def test_healthz(daemon):
    from sbxtest import Client
    r = Client(daemon.url, None).get("/healthz")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"
    assert r.headers.get("X-Request-Id")


def test_readyz(daemon):
    from sbxtest import Client
    r = Client(daemon.url, None).get("/readyz")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ready"
    assert "checks" in body


def test_request_ids_are_unique(alice):
    ids = {alice.get("/v1/sandbox/profiles").headers["X-Request-Id"] for _ in range(5)}
    assert len(ids) == 5


def test_profiles_shape(alice):
    r = alice.get("/v1/sandbox/profiles")
    assert r.status_code == 200
    body = r.json()
    names = [p["name"] for p in body["profiles"]]
    for builtin in ("container", "gvisor", "gvisor-small", "process"):
        assert builtin in names
    assert body["default"] in names
    defaults = [p["name"] for p in body["profiles"] if p["default"]]
    assert defaults == [body["default"]]
    for p in body["profiles"]:
        for k in ("name", "driver", "class", "available", "reason", "capabilities", "limits",
                  "default_timeout_s", "pool_size", "default"):
            assert k in p, (k, p)
        assert set(p["limits"]) >= {"cpu", "memory", "disk", "pids", "timeout_s",
                                    "output_bytes"}
        assert isinstance(p["capabilities"], list)
        if p["available"]:
            assert p["reason"] is None
        else:
            assert isinstance(p["reason"], str) and p["reason"], p
    # the process driver was enabled on the command line
    by = {p["name"]: p for p in body["profiles"]}
    assert by["process"]["available"] is True


def test_profiles_shape_unavailable(no_runsc):
    """A daemon whose runsc is broken lists gvisor, unavailable, with why."""
    r = no_runsc.alice.get("/v1/sandbox/profiles")
    assert r.status_code == 200
    by = {p["name"]: p for p in r.json()["profiles"]}
    assert by["process"]["available"] is True
    for name in ("gvisor", "gvisor-small"):
        assert by[name]["available"] is False, by[name]
        assert isinstance(by[name]["reason"], str) and by[name]["reason"], by[name]


def test_process_driver_refused_without_flag(daemon_factory):
    d = daemon_factory()
    d.extra_args = []
    argv = d.argv
    d.argv = lambda: [a for a in argv() if a != "--enable-unsafe-process-driver"]
    d.start()
    key = d.create_key("alice")
    c = d.client(key)
    by = {p["name"]: p for p in c.get("/v1/sandbox/profiles").json()["profiles"]}
    assert by["process"]["available"] is False
    assert by["process"]["reason"]
    r = c.post("/v1/sandbox/sessions", json={"profile": "process"})
    assert_error(r, 503, "runtime_unavailable")
    assert d.stop() == 0


def test_unknown_route_and_method(alice):
    assert_error(alice.get("/v1/sandbox/nothing-here"), 404, "not_found")
    r = alice.delete("/v1/sandbox/profiles")
    assert r.status_code == 405, r.text
    assert_error(r, 405, "method_not_allowed")


def test_dotdot_in_url_is_not_routed(alice):
    # requests would normalise dot segments: send the raw path
    import requests
    req = requests.Request("GET", alice.base + "/v1/sandbox/sessions/x/../y",
                           headers=alice.headers()).prepare()
    req.url = alice.base + "/v1/sandbox/sessions/x/../y"
    r = alice.s.send(req, timeout=10)
    assert r.status_code in (400, 404), r.text
