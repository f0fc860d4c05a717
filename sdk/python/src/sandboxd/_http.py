"""_http.py — the transport: one HTTP request per call over http.client,
the API key, Accept-Language, traceparent and X-Request-Id headers, JSON
in and out, error envelopes turned into exceptions, bounded retries with
exponential backoff and jitter on 429/503 (honouring Retry-After), and
Server-Sent Events read as an iterator of (event, data)."""
import contextvars
import http.client
import json
import os
import random
import select
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from . import errors
from .routes import ROUTES

__version__ = "0.1.0"

DEFAULT_URL = "http://127.0.0.1:8080"
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

TraceparentSource = Union[None, str, Callable[[], Optional[str]]]

# The caller's trace context for the requests made inside `with
# sandboxd.trace(traceparent):` (each thread and asyncio task has its own).
current_traceparent: "contextvars.ContextVar[Optional[str]]" = contextvars.ContextVar(
    "sandboxd_traceparent", default=None)


class Response:
    """A complete (non-streamed) answer."""

    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def request_id(self) -> Optional[str]:
        return self.headers.get("X-Request-Id")

    def json(self) -> Dict[str, Any]:
        """The JSON object of the answer (every JSON answer of the API is an object)."""
        v = json.loads(self.body.decode("utf-8")) if self.body else {}
        if not isinstance(v, dict):
            raise errors.TransportError(f"expected a JSON object, got {type(v).__name__}")
        return v


class EventStream:
    """An open SSE answer: iterate for (event, data) pairs, data parsed as
    JSON; close() (or leaving a `with` block) drops the connection, which
    for a foreground exec stream kills the command."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse):
        self._conn = conn
        self._resp = resp
        self.request_id = resp.getheader("X-Request-Id")

    def __iter__(self) -> Iterator[Tuple[str, Any]]:
        event: Optional[str] = None
        data: List[str] = []
        try:
            while True:
                raw = self._resp.readline()
                if not raw:
                    return
                line = raw.decode("utf-8").rstrip("\r\n")
                if line == "":
                    if event is not None or data:
                        payload = "\n".join(data)
                        yield (event or "message",
                               json.loads(payload) if payload else None)
                    event, data = None, []
                elif line.startswith(":"):
                    continue  # keep-alive comment
                elif line.startswith("event:"):
                    event = line[6:].lstrip(" ")
                elif line.startswith("data:"):
                    data.append(line[5:][1:] if line[5:6] == " " else line[5:])
        except socket.timeout as e:
            raise errors.TimeoutError(f"stream idle past its timeout: {e}") from e
        except (OSError, http.client.HTTPException) as e:
            raise errors.TransportError(f"stream broken: {e}") from e
        finally:
            self.close()

    def close(self) -> None:
        try:
            self._resp.close()
        finally:
            self._conn.close()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _retry_after(headers: Any) -> Optional[float]:
    v = headers.get("Retry-After")
    if v is None:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _should_retry(status: int, body: Any) -> bool:
    """429 and 503 are answered before the daemon stores or runs anything
    ("nothing is stored for a refused request"), so retrying them cannot
    duplicate a creation.  Of the 429s, only those that waiting can cure
    are retried: the rate limit, and the full execution queue; a tenant
    quota (details.limit sessions/executions/cpu_seconds_per_day) is not."""
    if status not in (429, 503):
        return False
    e = body.get("error") if isinstance(body, dict) else None
    if not isinstance(e, dict):
        return status == 503
    code = e.get("code")
    if status == 503:
        return code in ("runtime_unavailable", "not_ready")
    if code == "rate_limited":
        return True
    return code == "quota_exceeded" and not (e.get("details") or {}).get("limit")


class Transport:
    def __init__(self, base_url: Optional[str] = None, api_key: Optional[str] = None, *,
                 language: Optional[str] = None, timeout: float = 60.0, max_retries: int = 4,
                 backoff: float = 0.25, max_backoff: float = 8.0,
                 max_retry_after: float = 60.0, traceparent: TraceparentSource = None,
                 user_agent: Optional[str] = None,
                 on_retry: Optional[Callable[[Dict[str, Any]], None]] = None,
                 ssl_context: Optional[ssl.SSLContext] = None):
        self.base_url = (base_url or os.environ.get("SANDBOXD_URL") or DEFAULT_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("SANDBOXD_API_KEY")
        u = urllib.parse.urlsplit(self.base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url must be http(s)://host[:port]: {self.base_url!r}")
        self._scheme, self._host, self._port = u.scheme, u.hostname, u.port
        self._prefix = u.path.rstrip("/")
        self.language = language
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_retry_after = max_retry_after
        self.traceparent = traceparent
        self.user_agent = user_agent or f"sandboxd-python/{__version__}"
        self.on_retry = on_retry
        self.ssl_context = ssl_context
        self._idle = threading.local()

    # ---- building requests ----

    def _traceparent(self) -> Optional[str]:
        tp = current_traceparent.get()
        if tp:
            return tp
        src = self.traceparent
        if callable(src):
            return src()
        if src:
            return src
        return os.environ.get("TRACEPARENT") or None  # inside a sandbox: the daemon's own

    def path(self, op: str, params: Mapping[str, Any], query: Optional[Mapping[str, Any]]) -> str:
        method, tmpl = ROUTES[op]
        p = tmpl
        for k, v in params.items():
            safe = "/:@" if k.endswith("*") else ""
            p = p.replace("{" + k + "}", urllib.parse.quote(str(v), safe=safe))
        if "{" in p:
            raise ValueError(f"{op}: missing path parameter in {p}")
        q = {}
        for k, v in (query or {}).items():
            if v is None:
                continue
            q[k] = ("true" if v else "false") if isinstance(v, bool) else v
        return self._prefix + p + ("?" + urllib.parse.urlencode(q) if q else "")

    def headers(self, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        h = {"User-Agent": self.user_agent, "Accept": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        if self.language:
            h["Accept-Language"] = self.language
        tp = self._traceparent()
        if tp:
            h["traceparent"] = tp
        h.update(extra or {})
        return h

    def _connect(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=self.ssl_context)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    # One idle keep-alive connection per thread, reused by the next plain
    # request (streams always get their own).  A connection the daemon has
    # closed while idle is noticed before reuse (its socket reads as
    # ready: EOF), so reuse never turns a live request into a resend.
    def _take_idle(self, timeout: Optional[float]) -> Optional[http.client.HTTPConnection]:
        conn: Optional[http.client.HTTPConnection] = getattr(self._idle, "conn", None)
        self._idle.conn = None
        if conn is None or conn.sock is None:
            return None
        try:
            readable, _, _ = select.select([conn.sock], [], [], 0)
        except (OSError, ValueError):
            readable = [conn.sock]
        if readable:
            conn.close()
            return None
        conn.timeout = timeout
        conn.sock.settimeout(timeout)
        return conn

    def _give_idle(self, conn: http.client.HTTPConnection) -> None:
        old = getattr(self._idle, "conn", None)
        if old is not None:
            old.close()
        self._idle.conn = conn

    def close(self) -> None:
        """Closes this thread's idle connection."""
        old = getattr(self._idle, "conn", None)
        self._idle.conn = None
        if old is not None:
            old.close()

    def _delay(self, attempt: int, retry_after: Optional[float]) -> float:
        if retry_after is not None:
            # Retry-After is in whole seconds; a little jitter spreads a
            # crowd of clients released by the same refill.
            return min(retry_after, self.max_retry_after) + random.uniform(0, 0.1)
        cap = min(self.max_backoff, self.backoff * (2 ** attempt))
        return random.uniform(cap / 2, cap)  # "equal jitter"

    # ---- sending ----

    def request(self, op: str, params: Optional[Mapping[str, Any]] = None,
                **kw: Any) -> Response:
        """One request, its whole answer read (keyword arguments: query,
        json_body, body, content_type, headers, timeout, expect)."""
        r = self._send(op, params, stream=False, **kw)
        assert isinstance(r, Response)
        return r

    def stream(self, op: str, params: Optional[Mapping[str, Any]] = None,
               **kw: Any) -> Union[EventStream, Response]:
        """A request asking for an event stream: the open stream, or the
        whole answer when the daemon answered without one."""
        return self._send(op, params, stream=True, **kw)

    def _send(self, op: str, params: Optional[Mapping[str, Any]] = None, *,
              query: Optional[Mapping[str, Any]] = None, json_body: Any = None,
              body: Optional[bytes] = None, content_type: Optional[str] = None,
              headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
              stream: bool = False, expect: Tuple[int, ...] = ()
              ) -> Union[Response, EventStream]:
        method = ROUTES[op][0]
        path = self.path(op, params or {}, query)
        h = self.headers(headers)
        if json_body is not None:
            body = json.dumps(json_body).encode("utf-8")
            h["Content-Type"] = "application/json"
        elif body is not None:
            h["Content-Type"] = content_type or "application/octet-stream"
        if stream:
            h["Accept"] = "text/event-stream"
        if body is None and method in ("POST", "PUT", "PATCH"):
            body = b""
        t = self.timeout if timeout is None else timeout
        attempt = 0
        while True:
            conn = None if stream else self._take_idle(t)
            sent = conn is not None
            try:
                if conn is None:
                    conn = self._connect(t)
                    conn.connect()
                    sent = True
                conn.request(method, path, body=body, headers=h)
                resp = conn.getresponse()
            except (socket.timeout, TimeoutError) as e:
                if conn is not None:
                    conn.close()
                if (not sent or method in IDEMPOTENT) and attempt < self.max_retries:
                    attempt = self._sleep(op, attempt, None, f"timeout: {e}")
                    continue
                raise errors.TimeoutError(f"{method} {path}: no answer within {t}s") from e
            except (OSError, http.client.HTTPException) as e:
                if conn is not None:
                    conn.close()
                # Refused before anything was sent: safe for any method.
                if (not sent or method in IDEMPOTENT) and attempt < self.max_retries:
                    attempt = self._sleep(op, attempt, None, f"transport: {e}")
                    continue
                raise errors.TransportError(f"{method} {path}: {e}") from e
            ctype = resp.getheader("Content-Type", "")
            if stream and resp.status < 300 and ctype.startswith("text/event-stream"):
                return EventStream(conn, resp)
            try:
                data = resp.read()
            except socket.timeout as e:
                conn.close()
                raise errors.TimeoutError(f"{method} {path}: answer cut by the timeout") from e
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise errors.TransportError(f"{method} {path}: {e}") from e
            if resp.will_close:
                conn.close()
            else:
                self._give_idle(conn)
            r = Response(resp.status, resp.headers, data)
            if resp.status < 400 and (not expect or resp.status in expect):
                return r
            try:
                parsed = r.json() if ctype.startswith("application/json") else data.decode(
                    "utf-8", "replace")
            except (ValueError, errors.TransportError):
                parsed = data.decode("utf-8", "replace")
            ra = _retry_after(resp.headers)
            if _should_retry(resp.status, parsed) and attempt < self.max_retries:
                attempt = self._sleep(op, attempt, ra, f"HTTP {resp.status}", r.request_id)
                continue
            raise errors.error_from_envelope(resp.status, parsed, ra, r.request_id)

    def _sleep(self, op: str, attempt: int, retry_after: Optional[float], why: str,
               request_id: Optional[str] = None) -> int:
        d = self._delay(attempt, retry_after)
        if self.on_retry:
            self.on_retry({"operation": op, "attempt": attempt + 1, "delay": d, "why": why,
                           "retry_after": retry_after, "request_id": request_id})
        time.sleep(d)
        return attempt + 1
