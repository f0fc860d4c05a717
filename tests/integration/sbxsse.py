"""sbxsse.py — a minimal Server-Sent Events reader for the streaming,
process and terminal tests: yields (event, data) with data parsed
as JSON, from a `requests` response opened with stream=True."""
import base64
import json
import queue
import time


def events(resp):
    """Yields (event, data) pairs until the stream ends."""
    event, data = None, []
    for raw in resp.iter_lines(chunk_size=1, decode_unicode=False):
        line = raw.decode("utf-8")
        if line == "":
            if event is not None:
                yield event, json.loads("\n".join(data)) if data else None
            event, data = None, []
        elif line.startswith(":"):
            continue  # keep-alive comment
        elif line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])


def chunk_bytes(d):
    """The bytes of a stdout/stderr event's data."""
    if "data" in d:
        return d["data"].encode("utf-8")
    return base64.b64decode(d["data_base64"])


def collect(resp):
    """Reads a whole stream: (list of (event, data), exit data or None)."""
    evs = list(events(resp))
    ex = [d for e, d in evs if e == "exit"]
    return evs, (ex[-1] if ex else None)


SSE = {"Accept": "text/event-stream"}


def pump(resp, q):
    """Reads an SSE response line by line into queue q as (event, data)
    pairs, then ("<eof>", None) when the stream ends or is closed under us
    (for tests that follow a stream from a thread)."""
    ev = None
    try:
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.decode().rstrip("\n")
            if line.startswith("event: "):
                ev = line[7:]
            elif line.startswith("data: "):
                q.put((ev, json.loads(line[6:])))
    except Exception:  # closed under us
        pass
    q.put(("<eof>", None))


def until(q, pred, timeout, what):
    """Takes (event, data) pairs off a pump()'s queue until pred(ev, data)
    holds; returns every pair seen, the matching one last.  Fails at the
    deadline or at the end of the stream."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        try:
            ev, data = q.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        seen.append((ev, data))
        if pred(ev, data):
            return seen
        if ev == "<eof>":
            break
    raise AssertionError(f"no {what} within {timeout}s; saw {seen[-20:]}")
