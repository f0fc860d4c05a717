"""HTTP edge cases, over raw sockets so nothing between the test and the
daemon normalises the bytes: ambiguous framing (RFC 9112 §6.1) is 400 and
the connection closed, so nothing can be smuggled behind it; undecodable
path segments and query parameters are 400 naming them, never a dropped
connection or a handler acting on a leniently decoded value."""
import json
import socket
import time

import pytest

from sbxtest import assert_error


def exchange(port, data, timeout=15):
    """Sends data, reads until the daemon closes (or timeout); returns
    (bytes, closed_by_daemon)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                d = s.recv(65536)
            except socket.timeout:
                return out, False
            except ConnectionResetError:
                return out, True
            if not d:
                return out, True
            out += d
        return out, False
    finally:
        s.close()


def responses(raw):
    """Splits a byte stream into (status, headers dict, body) responses."""
    out = []
    while raw:
        head, sep, rest = raw.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        hdrs = {k.strip().lower(): v.strip() for k, v in
                (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
        n = int(hdrs.get("content-length", "0"))
        out.append((status, hdrs, rest[:n]))
        raw = rest[n:]
    return out


def envelope(body, field):
    e = json.loads(body)["error"]
    assert e["code"] == "invalid_request", e
    assert e["details"].get("field") == field, e
    assert e["message_i18n"]["en"] and e["message_i18n"]["fr"], e
    return e


def one_refusal(daemon, data, field):
    raw, closed = exchange(daemon.port, data)
    got = responses(raw)
    assert len(got) == 1, f"want one 400 and nothing after it, got {got!r}"
    status, hdrs, body = got[0]
    assert status == 400, got
    assert closed, "the connection must be closed after a framing error"
    assert hdrs.get("connection", "").lower() == "close", hdrs
    return envelope(body, field)


SMUGGLED = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def test_content_length_with_transfer_encoding_is_400_and_closes(daemon, keys):
    # A proxy that honours Content-Length sees one request with a 5-byte
    # body; one that honours chunked sees an empty body and then a second
    # request.  Either reading must not reach a handler.
    body = b"0\r\n\r\n"
    head = (f"POST /v1/sandbox/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {keys['alice']}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    e = one_refusal(daemon, head + body + SMUGGLED, "Transfer-Encoding")
    assert "Content-Length" in e["message"], e
    assert daemon.healthy()


@pytest.mark.parametrize("te", ["gzip", "chunked, gzip", "identity"])
def test_transfer_coding_other_than_chunked_is_400(daemon, te):
    head = (f"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: {te}\r\n\r\n"
            ).encode()
    one_refusal(daemon, head + b"0\r\n\r\n" + SMUGGLED, "Transfer-Encoding")


def test_two_transfer_encoding_headers_are_400(daemon):
    head = (b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    one_refusal(daemon, head + b"0\r\n\r\n" + SMUGGLED, "Transfer-Encoding")


def test_conflicting_content_lengths_are_400(daemon):
    head = (b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n"
            b"Content-Length: 43\r\n\r\n")
    one_refusal(daemon, head + SMUGGLED, "Content-Length")


def test_space_before_colon_is_400(daemon):
    # libmicrohttpd 0.9.75 would store a header named "Transfer-Encoding "
    # and ignore it, while a proxy may honour it (RFC 9112 §5.1: 400).
    head = (b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n"
            b"Transfer-Encoding : chunked\r\n\r\n")
    one_refusal(daemon, head + b"0\r\n\r\n" + SMUGGLED, "headers")


def test_plain_keep_alive_still_works(daemon):
    # The checks refuse only what is ambiguous: two ordinary requests on one
    # connection both get answered.
    raw, _ = exchange(daemon.port, SMUGGLED + SMUGGLED, timeout=3)
    got = responses(raw)
    assert [g[0] for g in got] == [200, 200], got


def request(daemon, method, target, key=None, body=b""):
    head = f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    if key:
        head += f"Authorization: Bearer {key}\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    raw, _ = exchange(daemon.port, head.encode() + body)
    got = responses(raw)
    assert got, f"{method} {target}: the connection was dropped without an answer"
    return got[0]


def test_put_file_with_undecodable_path_is_400_and_writes_nothing(daemon, alice, any_profile):
    sid = alice.new_session(any_profile)["id"]
    try:
        status, _, body = request(daemon, "PUT", f"/v1/sandbox/sessions/{sid}/files?path=%ff%fe",
                                  alice.key, b"x")
        assert status == 400, body
        e = envelope(body, "path")
        assert "UTF-8" in e["message"], e
        r = alice.get(f"/v1/sandbox/sessions/{sid}/files", params={"path": "/work", "list": "true"})
        assert r.status_code == 200, r.text
        assert r.json()["entries"] == [], "a refused upload left a file behind"
        # the same name, well encoded, is an ordinary file name
        status, _, body = request(daemon, "PUT",
                                  f"/v1/sandbox/sessions/{sid}/files?path=/work/caf%C3%A9",
                                  alice.key, b"x")
        assert status == 201, body
        assert json.loads(body)["path"] == "/work/café"
    finally:
        alice.delete(f"/v1/sandbox/sessions/{sid}")


@pytest.mark.parametrize("query,field", [
    ("status=%ff", "status"),        # invalid UTF-8
    ("status=a%00b", "status"),      # an encoded NUL would cut the value short
    ("status=%zz", "status"),        # not an escape
    ("status=ab%4", "status"),       # a truncated escape
    ("limit=1&cursor=%c0%af", "cursor"),  # an overlong '/'
    ("st%ffatus=1", "query"),        # the name itself is undecodable
])
def test_undecodable_query_parameter_is_400_naming_it(daemon, alice, query, field):
    status, _, body = request(daemon, "GET", f"/v1/sandbox/sessions?{query}", alice.key)
    assert status == 400, body
    envelope(body, field)


@pytest.mark.parametrize("target,field", [
    ("/v1/sandbox/sessions/%ff%fe", "id"),
    ("/v1/sandbox/sessions/ses_x%00y/files?path=/work", "id"),
    ("/v1/sandbox/executions/%e2%82", "id"),
    ("/v1/sandbox/sessions/ses_1/processes/%fe", "pid"),
    ("/v1/nowhere/%ff", "url"),
])
def test_undecodable_path_segment_is_400_naming_it(daemon, alice, target, field):
    status, _, body = request(daemon, "GET", target, alice.key)
    assert status == 400, body
    envelope(body, field)


def test_undecodable_parameter_is_400_before_authentication(daemon):
    # No handler and no key lookup sees an undecodable value.
    status, _, body = request(daemon, "GET", "/v1/sandbox/sessions/%ff")
    assert status == 400, body
    envelope(body, "id")


def test_overlong_path_is_400_not_truncated(daemon, alice):
    status, _, body = request(daemon, "GET", "/v1/sandbox/sessions/" + "a" * 3000, alice.key)
    assert status == 400, body
    envelope(body, "url")


def test_deeply_nested_json_is_400_and_daemon_survives(daemon, alice):
    # Connection threads have a bounded stack: jansson's own depth limit
    # must be what stops a deep document.
    body = b"[" * 200000 + b"]" * 200000
    status, _, raw = request(daemon, "POST", "/v1/sandbox/executions", alice.key, body)
    assert status == 400, raw[:300]
    assert daemon.healthy()
