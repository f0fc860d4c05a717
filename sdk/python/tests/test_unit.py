"""Unit tests of the Python SDK's own logic — retries, backoff, error
mapping, headers, timeouts, SSE parsing, models, the asyncio face — against
a scripted HTTP server on 127.0.0.1 (the daemon itself is exercised by
tests/sdk/test_sdk.py).  Run: python3 -m unittest discover sdk/python/tests"""
import asyncio
import http.server
import json
import os
import socket
import sys
import threading
import time
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import sandboxd  # noqa: E402
from sandboxd import _http  # noqa: E402
from sandboxd.aio import AsyncClient  # noqa: E402


def envelope(code, status, **details):
    return status, {"Content-Type": "application/json", "X-Request-Id": "req_x"}, json.dumps(
        {"error": {"code": code, "message": f"{code} en", "message_i18n": {"en": f"{code} en",
                                                                           "fr": f"{code} fr"},
                   "request_id": "req_x", "details": details}}).encode()


def ok(obj, status=200, ctype="application/json", extra=None):
    h = {"Content-Type": ctype}
    h.update(extra or {})
    return status, h, obj if isinstance(obj, bytes) else json.dumps(obj).encode()


class Script(http.server.ThreadingHTTPServer):
    """Answers from a list of (status, headers, body) or callables; records
    every request as (method, path, headers, body)."""
    daemon_threads = True

    def __init__(self):
        self.answers, self.requests, self.peers = [], [], []

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def handle_any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                srv = self.server
                srv.requests.append((self.command, self.path, dict(self.headers), body))
                srv.peers.append(self.client_address[1])
                a = srv.answers.pop(0) if srv.answers else ok({})
                if callable(a):
                    a = a(self)
                    if a is None:
                        return
                status, headers, data = a
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

        super().__init__(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()


def drop(handler):
    """Closes the connection without an answer."""
    handler.close_connection = True
    handler.connection.shutdown(socket.SHUT_RDWR)
    return None


class Base(unittest.TestCase):
    def setUp(self):
        self.srv = Script()
        self.retries = []
        self.client = sandboxd.Client(base_url=self.srv.url, api_key="sbx_ktest",
                                      backoff=0.01, max_backoff=0.05,
                                      on_retry=self.retries.append)

    def tearDown(self):
        self.client.close()
        self.srv.shutdown()
        self.srv.server_close()


class TestRetries(Base):
    def test_rate_limited_is_retried_after_retry_after(self):
        self.srv.answers = [envelope("rate_limited", 429, limit="requests_per_second", value=1)
                            [:1] + ({"Content-Type": "application/json", "Retry-After": "0"},
                                    envelope("rate_limited", 429)[2]),
                            ok({"profiles": [], "default": "container"})]
        pl = self.client.profiles()
        self.assertEqual(pl.default, "container")
        self.assertEqual(len(self.srv.requests), 2)
        self.assertEqual(self.retries[0]["retry_after"], 0.0)
        self.assertEqual(self.retries[0]["operation"], "listProfiles")

    def test_a_create_refused_by_429_is_retried_once_refused_means_nothing_stored(self):
        self.srv.answers = [envelope("rate_limited", 429),
                            ok({"id": "exe_1", "status": "queued", "profile": "p"}, 202)]
        c = self.client.sandbox.executions.create(None, ["true"])
        self.assertEqual(c.id, "exe_1")
        self.assertEqual([r[0] for r in self.srv.requests], ["POST", "POST"])

    def test_tenant_quota_is_not_retried(self):
        self.srv.answers = [envelope("quota_exceeded", 429, limit="sessions", value=2)]
        with self.assertRaises(sandboxd.QuotaExceededError) as cm:
            self.client.sandbox.sessions.create("container")
        self.assertEqual(cm.exception.details, {"limit": "sessions", "value": 2})
        self.assertEqual(len(self.srv.requests), 1)

    def test_queue_full_is_retried(self):
        self.srv.answers = [envelope("quota_exceeded", 429),
                            ok({"id": "exe_1", "status": "queued", "profile": "p"}, 202)]
        self.client.sandbox.executions.create(None, ["true"])
        self.assertEqual(len(self.srv.requests), 2)

    def test_503_bounded(self):
        self.srv.answers = [envelope("runtime_unavailable", 503)] * 10
        c = self.client.with_options(max_retries=2, backoff=0.01, max_backoff=0.02)
        with self.assertRaises(sandboxd.RuntimeUnavailableError):
            c.sandbox.sessions.create("gvisor")
        self.assertEqual(len(self.srv.requests), 3)

    def test_500_is_not_retried(self):
        self.srv.answers = [envelope("internal", 500)]
        with self.assertRaises(sandboxd.InternalError):
            self.client.sandbox.sessions.list()
        self.assertEqual(len(self.srv.requests), 1)

    def test_dropped_post_is_not_resent_but_get_is(self):
        self.srv.answers = [drop]
        with self.assertRaises(sandboxd.TransportError):
            self.client.sandbox.executions.create(None, ["true"])
        self.assertEqual(len(self.srv.requests), 1, "a POST that may have run was sent again")
        self.srv.answers = [drop, ok({"sessions": [], "next_cursor": None})]
        self.assertEqual(len(self.client.sandbox.sessions.list()), 0)
        self.assertEqual(len(self.srv.requests), 3)

    def test_connection_refused_is_retried_for_a_post(self):
        port = Script().server_address[1]  # a port that answers nothing once closed
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
        s.close()
        tries = []
        c = sandboxd.Client(base_url=f"http://127.0.0.1:{dead}", api_key="k", max_retries=2,
                            backoff=0.01, on_retry=tries.append)
        with self.assertRaises(sandboxd.TransportError):
            c.sandbox.executions.create(None, ["true"])
        self.assertEqual(len(tries), 2)
        del port

    def test_backoff_grows_and_retry_after_is_capped(self):
        t = _http.Transport(self.srv.url, "k", backoff=1, max_backoff=4, max_retry_after=5)
        for attempt, cap in ((0, 1), (1, 2), (2, 4), (5, 4)):
            for _ in range(20):
                d = t._delay(attempt, None)
                self.assertTrue(cap / 2 <= d <= cap, (attempt, d))
        self.assertLess(t._delay(0, 3600), 5.2)
        self.assertGreaterEqual(t._delay(0, 2), 2)


def close_after(answer):
    """Answers, then closes the connection without saying so (an idle
    keep-alive connection the server drops)."""
    def run(handler):
        handler.close_connection = True
        return answer
    return run


class TestKeepAlive(Base):
    def test_plain_requests_share_one_connection(self):
        for _ in range(3):
            self.client.healthz()
        self.assertEqual(len(set(self.srv.peers)), 1, self.srv.peers)

    def test_a_connection_dropped_while_idle_is_not_reused_and_nothing_is_resent(self):
        self.srv.answers = [close_after(ok({})),
                            ok({"id": "exe_1", "status": "queued", "profile": "p"}, 202)]
        self.client.healthz()
        time.sleep(0.2)  # the server's close reaches the client
        self.assertEqual(self.client.sandbox.executions.create(None, ["true"]).id, "exe_1")
        self.assertEqual([r[0] for r in self.srv.requests], ["GET", "POST"])
        self.assertEqual(len(set(self.srv.peers)), 2)
        self.assertEqual(self.retries, [])


class TestErrorsAndHeaders(Base):
    def test_every_code_has_its_class(self):
        for code, cls in sandboxd.ERRORS_BY_CODE.items():
            self.srv.answers = [envelope(code, 418)]
            with self.assertRaises(cls) as cm:
                self.client.sandbox.sessions.get("ses_1")
            e = cm.exception
            self.assertEqual((e.code, e.message, e.message_i18n["fr"], e.request_id),
                             (code, f"{code} en", f"{code} fr", "req_x"))
            self.assertIsInstance(e, sandboxd.APIError)

    def test_non_envelope_error(self):
        self.srv.answers = [ok(b"<html>bad gateway</html>", 502, "text/html")]
        with self.assertRaises(sandboxd.APIError) as cm:
            self.client.healthz()
        self.assertEqual((cm.exception.status, cm.exception.code), (502, "http_502"))

    def test_headers(self):
        c = self.client.with_options(language="fr", traceparent="00-" + "a" * 32 + "-" + "b" * 16
                                     + "-01")
        c.healthz()
        h = self.srv.requests[-1][2]
        self.assertEqual(h["Authorization"], "Bearer sbx_ktest")
        self.assertEqual(h["Accept-Language"], "fr")
        self.assertTrue(h["traceparent"].startswith("00-aaaa"))
        self.assertTrue(h["User-Agent"].startswith("sandboxd-python/"))
        # the caller's context wins, a callable is asked each time
        with sandboxd.trace("00-" + "c" * 32 + "-" + "d" * 16 + "-01"):
            c.healthz()
        self.assertTrue(self.srv.requests[-1][2]["traceparent"].startswith("00-cccc"))
        c2 = self.client.with_options(traceparent=lambda: "00-" + "e" * 32 + "-" + "f" * 16 + "-00")
        c2.healthz()
        self.assertTrue(self.srv.requests[-1][2]["traceparent"].startswith("00-eeee"))
        with mock.patch.dict(os.environ, {"TRACEPARENT": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}):
            self.client.healthz()
        self.assertTrue(self.srv.requests[-1][2]["traceparent"].startswith("00-1111"))
        self.client.healthz()
        self.assertNotIn("traceparent", self.srv.requests[-1][2])

    def test_environment_defaults(self):
        with mock.patch.dict(os.environ, {"SANDBOXD_URL": self.srv.url + "/",
                                          "SANDBOXD_API_KEY": "sbx_kenv"}):
            c = sandboxd.Client()
            c.healthz()
        self.assertEqual(c.base_url, self.srv.url)
        self.assertEqual(self.srv.requests[-1][2]["Authorization"], "Bearer sbx_kenv")

    def test_paths_and_queries(self):
        self.srv.answers = [(204, {}, b""), ok(b"data", 200, "application/octet-stream")]
        self.client.images.delete("127.0.0.1:5000/t/busybox:1")
        self.assertEqual(self.srv.requests[-1][:2],
                         ("DELETE", "/v1/sandbox/images/127.0.0.1:5000/t/busybox:1"))
        s = self.client.sandbox.sessions.session("ses_1")
        self.assertEqual(s.files.get("/work/a b&c"), b"data")
        self.assertEqual(self.srv.requests[-1][1],
                         "/v1/sandbox/sessions/ses_1/files?path=%2Fwork%2Fa+b%26c")

    def test_timeout(self):
        def slow(h):
            time.sleep(1.5)
            return ok({})
        self.srv.answers = [slow]
        c = self.client.with_options(timeout=0.3)  # retries on, but a POST that may have run is not resent
        t0 = time.monotonic()
        with self.assertRaises(sandboxd.TimeoutError):
            c.sandbox.executions.create(None, ["true"])
        self.assertLess(time.monotonic() - t0, 1.4)
        self.assertEqual(len(self.srv.requests), 1)


SSE = ("Content-Type", "text/event-stream")


class TestStreamsAndModels(Base):
    def test_exec_stream(self):
        body = (b": keep-alive\n\nevent: stdout\ndata: {\"data\": \"a\\n\", \"offset\": 0}\n\n"
                b"event: stderr\r\ndata: {\"data_base64\": \"/w==\", \"offset\": 0}\r\n\r\n"
                b"event: exit\ndata: {\"status\": \"succeeded\", \"exit_code\": 0,\n"
                b"data:  \"stdout\": \"a\\n\"}\n\n")
        self.srv.answers = [ok(body, 200, "text/event-stream")]
        s = self.client.sandbox.sessions.session("ses_1")
        evs = list(s.stream(["echo", "a"]))
        self.assertEqual([e.event for e in evs], ["stdout", "stderr", "exit"])
        self.assertEqual(evs[0].text, "a\n")
        self.assertEqual(evs[1].bytes, b"\xff")
        self.assertEqual((evs[2].result.status, evs[2].result.exit_code), ("succeeded", 0))
        self.assertEqual(self.srv.requests[-1][2]["Accept"], "text/event-stream")
        self.assertEqual(json.loads(self.srv.requests[-1][3]), {"command": ["echo", "a"]})

    def test_models_keep_raw_and_decode(self):
        ex = sandboxd.Execution.from_dict({"id": "exe_1", "status": "succeeded", "stdout": "/w==",
                                           "stdout_encoding": "base64", "new_field": 1,
                                           "files": [{"path": "/a", "size": 1, "sha256": "0"}],
                                           "usage": {"cpu_seconds": 0.5}})
        self.assertEqual(ex.stdout_bytes, b"\xff")
        self.assertEqual(ex["new_field"], 1)
        self.assertTrue(ex.done)
        self.assertEqual(ex.files[0].path, "/a")
        self.assertEqual(ex.usage.cpu_seconds, 0.5)
        p = sandboxd.Profile.from_dict({"name": "c", "class": "shared-kernel"})
        self.assertEqual(p.class_, "shared-kernel")

    def test_execute_long_polls_until_final(self):
        self.srv.answers = [ok({"id": "exe_1", "status": "queued", "profile": "p"}, 202),
                            ok({"id": "exe_1", "status": "running"}),
                            ok({"id": "exe_1", "status": "succeeded", "exit_code": 0,
                                "stdout": "1\n"})]
        ex = self.client.sandbox.execute("python:3.12-slim", ["python", "-c", "print(1)"],
                                         profile="gvisor")
        self.assertEqual((ex.status, ex.exit_code, ex.stdout), ("succeeded", 0, "1\n"))
        self.assertEqual(json.loads(self.srv.requests[0][3]),
                         {"profile": "gvisor", "image": "python:3.12-slim",
                          "command": ["python", "-c", "print(1)"]})
        self.assertIn("wait_s=30", self.srv.requests[1][1])

    def test_files_as_bytes_travel_as_base64(self):
        self.srv.answers = [ok({"id": "exe_1", "status": "queued", "profile": "p"}, 202)]
        self.client.sandbox.executions.create(None, ["true"], files={"a": b"\x00", "b": "t"})
        self.assertEqual(json.loads(self.srv.requests[0][3])["files"],
                         [{"path": "a", "content": "AA==", "encoding": "base64"},
                          {"path": "b", "content": "t"}])

    def test_asyncio_face(self):
        self.srv.answers = [ok({"profiles": [], "default": "x"}),
                            ok(b"event: stdout\ndata: {\"data\": \"z\", \"offset\": 0}\n\n"
                               b"event: exit\ndata: {\"status\": \"succeeded\"}\n\n", 200,
                               "text/event-stream")]

        async def main():
            c = AsyncClient(base_url=self.srv.url, api_key="k")
            pl = await c.profiles()
            s = await c.sandbox.sessions.session("ses_1")
            evs = [e.event async for e in s.stream(["true"])]
            return pl.default, evs
        self.assertEqual(asyncio.run(main()), ("x", ["stdout", "exit"]))


TOOL = {"name": "add", "profile": "container", "image": "python:3.12-slim", "generation": 1,
        "digest": "sha256:" + "0" * 64, "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "manifest": {"apiVersion": "sandboxd/v1", "kind": "Tool", "metadata": {"name": "add"},
                     "spec": {"sandbox_profile": "container", "image": "python:3.12-slim",
                              "command": ["python3", "add.py"]}}}


def violation(path, index=None):
    v = {"path": path, "message": f"bad {path}", "message_i18n": {"en": f"bad {path}",
                                                                  "fr": f"mauvais {path}"}}
    if index is not None:
        v["index"] = index
    return v


class TestContractsAndTools(Base):
    def test_contracts(self):
        self.srv.answers = [ok({"contracts": ["tool-manifest"]}),
                            ok({"type": "object"}, ctype="application/schema+json"),
                            ok({"valid": False, "violations": [violation("/spec/command"),
                                                               violation("")]})]
        self.assertEqual(self.client.contracts.list(), ["tool-manifest"])
        self.assertEqual(self.client.contracts.get("tool-manifest"), {"type": "object"})
        v = self.client.contracts.validate("tool-manifest", {"kind": "Tool"})
        self.assertFalse(v.valid)
        self.assertEqual([x.path for x in v.violations], ["/spec/command", ""])
        self.assertEqual(v.violations[0].message_i18n["fr"], "mauvais /spec/command")
        self.assertIsNone(v.violations[0].index)
        r = self.srv.requests
        self.assertEqual([x[:2] for x in r], [("GET", "/v1/contracts"),
                                              ("GET", "/v1/contracts/tool-manifest"),
                                              ("POST", "/v1/contracts/tool-manifest/validate")])
        self.assertEqual(json.loads(r[2][3]), {"kind": "Tool"})

    def test_apply_one_document_or_a_list(self):
        m = sandboxd.ToolManifest.build("add", profile="container", image="python:3.12-slim",
                                        command=["python3", "add.py"],
                                        input_schema={"type": "object"})
        self.srv.answers = [ok({"dry_run": True, "results": [{"name": "add", "action": "created",
                                                               "tool": TOOL}]}),
                            ok({"dry_run": False, "results": [
                                {"name": "add", "action": "unchanged", "tool": TOOL},
                                {"name": "b", "action": "updated", "tool": dict(TOOL, name="b",
                                                                                generation=2)}]})]
        res = self.client.tools.apply(m, dry_run=True)
        self.assertTrue(res.dry_run)
        self.assertEqual((res.results[0].action, res.results[0].tool.generation), ("created", 1))
        self.assertEqual(res.results[0].tool.manifest.spec["command"], ["python3", "add.py"])
        self.assertEqual(res.results[0].tool.manifest.api_version, "sandboxd/v1")
        doc = {"apiVersion": "sandboxd/v1", "kind": "Tool", "metadata": {"name": "b"},
               "spec": {"sandbox_profile": "container", "image": "host", "command": ["true"]}}
        res = self.client.tools.apply([m, doc])
        self.assertEqual([(x.name, x.action) for x in res.results],
                         [("add", "unchanged"), ("b", "updated")])
        r = self.srv.requests
        self.assertEqual(r[0][1], "/v1/manifests/apply?dry_run=true")
        self.assertEqual(json.loads(r[0][3]), {
            "apiVersion": "sandboxd/v1", "kind": "Tool", "metadata": {"name": "add"},
            "spec": {"sandbox_profile": "container", "image": "python:3.12-slim",
                     "command": ["python3", "add.py"], "input_schema": {"type": "object"}}})
        self.assertEqual(r[1][1], "/v1/manifests/apply")
        self.assertEqual(json.loads(r[1][3]), {"items": [m.to_dict(), doc]})

    def test_violations_of_an_apply_and_of_an_input(self):
        self.srv.answers = [envelope("invalid_request", 400, field="body",
                                     violations=[violation("/spec/image", 0),
                                                 violation("/metadata/name", 1)]),
                            envelope("invalid_request", 400, field="input",
                                     violations=[violation("/input/a")])]
        with self.assertRaises(sandboxd.InvalidRequestError) as cm:
            self.client.tools.apply([{"kind": "Tool"}, {"kind": "Tool"}])
        self.assertEqual([(v.index, v.path) for v in cm.exception.violations],
                         [(0, "/spec/image"), (1, "/metadata/name")])
        with self.assertRaises(sandboxd.InvalidRequestError) as cm:
            self.client.tools.invoke("add", {"a": "x"})
        v = cm.exception.violations
        self.assertEqual((v[0].path, v[0].message, v[0].index), ("/input/a", "bad /input/a", None))
        self.assertEqual(len(self.srv.requests), 2, "a 400 was retried")
        self.assertEqual(sandboxd.APIError(400, "x", "m").violations, [])

    def test_list_iter_get_delete(self):
        self.srv.answers = [ok({"tools": [TOOL], "next_cursor": "add"}),
                            ok({"tools": [dict(TOOL, name="b")], "next_cursor": None}),
                            ok(TOOL), (204, {}, b""), envelope("not_found", 404)]
        self.assertEqual([t.name for t in self.client.tools.iter(page_size=1)], ["add", "b"])
        t = self.client.tools.get("add")
        self.assertEqual((t.name, t.profile, t.digest[:7]), ("add", "container", "sha256:"))
        self.client.tools.delete("add")
        with self.assertRaises(sandboxd.NotFoundError):
            self.client.tools.get("add")
        self.assertEqual([x[:2] for x in self.srv.requests], [
            ("GET", "/v1/tools?limit=1"), ("GET", "/v1/tools?limit=1&cursor=add"),
            ("GET", "/v1/tools/add"), ("DELETE", "/v1/tools/add"), ("GET", "/v1/tools/add")])

    def test_invoke_and_run(self):
        inv = {"id": "exe_1", "status": "queued", "profile": "container", "tool": "add",
               "generation": 3}
        self.srv.answers = [ok(inv, 202), ok(inv, 202), ok({"id": "exe_1", "status": "running"}),
                            ok({"id": "exe_1", "status": "succeeded", "exit_code": 0,
                                "stdout": "5\n", "metadata": {"tool": "add"}})]
        got = self.client.tools.invoke("add", {"a": 2, "b": 3}, metadata={"run": "r1"})
        self.assertEqual((got.id, got.tool, got.generation), ("exe_1", "add", 3))
        ex = self.client.tools.run("add", {"a": 2, "b": 3})
        self.assertEqual((ex.status, ex.stdout, ex.metadata["tool"]), ("succeeded", "5\n", "add"))
        r = self.srv.requests
        self.assertEqual([x[:2] for x in r], [
            ("POST", "/v1/tools/add/invoke"), ("POST", "/v1/tools/add/invoke"),
            ("GET", "/v1/sandbox/executions/exe_1?wait_s=30.0"),
            ("GET", "/v1/sandbox/executions/exe_1?wait_s=30.0")])
        self.assertEqual(json.loads(r[0][3]), {"input": {"a": 2, "b": 3},
                                               "metadata": {"run": "r1"}})
        self.assertEqual(json.loads(r[1][3]), {"input": {"a": 2, "b": 3}})

    def test_run_bounded_by_its_timeout(self):
        def running(h):
            time.sleep(0.05)
            return ok({"id": "exe_1", "status": "running"})
        self.srv.answers = [ok({"id": "exe_1", "status": "queued", "profile": "p", "tool": "t",
                                "generation": 1}, 202)] + [running] * 50
        with self.assertRaises(sandboxd.TimeoutError):
            self.client.tools.run("t", timeout=0.2)
        self.assertEqual(json.loads(self.srv.requests[0][3]), {})


class TestImportPaths(unittest.TestCase):
    def test_src_and_the_project_dir_both_import(self):
        import subprocess
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for p in (os.path.join(here, "src"), here):
            r = subprocess.run([sys.executable, "-c", "import sandboxd, sandboxd.aio; "
                                "from sandboxd import Client, NotFoundError; "
                                "print(sandboxd.__version__, Client.__module__)"],
                               env=dict(os.environ, PYTHONPATH=p), cwd="/",
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split(), ["0.1.0", "sandboxd.client"])


if __name__ == "__main__":
    unittest.main()
