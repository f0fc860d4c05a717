"""sbxsse.py — a minimal Server-Sent Events reader for the streaming,
process and terminal tests (issue 4): yields (event, data) with data parsed
as JSON, from a `requests` response opened with stream=True."""
import base64
import json


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
