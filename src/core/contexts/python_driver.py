# python_driver.py — the interpreter side of a Python context.
# Embedded into sandboxd at build time (gen_drivers.py) and started inside
# the sandbox as `python3 -u -c <this file>`.  Standard library only.
#
# Protocol (core/contexts.c is the other end):
#   stdin, first line: the context's nonce (32 hex digits).
#   stdin, then one JSON object per line: {"op": "run", "seq": N,
#     "code": "...", "max_output": BYTES, "stream": BOOL}.
#   stdout: frames "<nonce> <json>\n": first {"hello": ...}, then one reply
#     per run: {"seq", "stdout", "stderr", "stdout_truncated",
#     "stderr_truncated", "result", "outputs", "error", "execution_count"}.
#     A run with "stream": true also sends, while it runs and before its
#     reply, progress frames {"seq", "stream": "stdout"|"stderr", "text"}:
#     what it printed, gathered for up to LIVE_INTERVAL seconds (whole
#     lines; a partial line once it waited a whole interval), at most
#     max_output characters per stream.  The reply still holds everything.
# Anything else on stdout/stderr (a subprocess writing to the inherited
# descriptors) is not a frame: the daemon reports it as the run's output.
# The nonce keeps printed text from passing for a reply by accident; code
# that goes looking for it can only forge its own run's answer, which the
# daemon checks like any other input from the sandbox.
import ast
import base64
import builtins
import io
import json
import linecache
import os
import sys
import threading
import traceback
import types

MAX_RESULT = 1 << 20          # characters of repr() kept
MAX_IMAGES_BYTES = 16 << 20   # PNG bytes per run
LIVE_INTERVAL = 0.05          # seconds between progress frames of a streamed run


class Capture(io.TextIOBase):
    """A text stream keeping the head and the tail of what is written."""

    def __init__(self, cap, live=None, name=None):
        super().__init__()
        self.live, self.name = live, name
        self.half = max(1, cap // 2)
        self.head = []
        self.head_len = 0
        self.tail = ""
        self.dropped = 0

    def writable(self):
        return True

    @property
    def encoding(self):
        return "utf-8"

    def isatty(self):
        return False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        n = len(s)
        if self.live is not None:
            self.live.add(self.name, s)
        if self.head_len < self.half:
            take = s[:self.half - self.head_len]
            self.head.append(take)
            self.head_len += len(take)
            s = s[len(take):]
        if s:
            self.tail += s
            if len(self.tail) > self.half:
                self.dropped += len(self.tail) - self.half
                self.tail = self.tail[-self.half:]
        return n

    def value(self):
        return "".join(self.head) + self.tail


class Live:
    """The progress frames of a streamed run: what it prints is gathered
    and sent by a thread every LIVE_INTERVAL seconds, then by close()."""

    def __init__(self, driver, seq, cap):
        self.driver, self.seq = driver, seq
        self.lock = threading.Lock()
        self.pending = []  # [stream, text, ticks waited], in order
        self.left = {"stdout": cap, "stderr": cap}
        self.closed = False
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, name="sbx-live", daemon=True)
        self.thread.start()

    def add(self, stream, s):
        with self.lock:
            s = s[:max(0, self.left[stream])]
            if self.closed or not s:
                return
            self.left[stream] -= len(s)
            if self.pending and self.pending[-1][0] == stream:
                self.pending[-1][1] += s
            else:
                self.pending.append([stream, s, 0])

    def take(self, everything):
        """What is due: whole lines, a partial line that already waited a
        tick, or (everything) all of it."""
        due = []
        with self.lock:
            keep = []
            for i, (stream, text, ticks) in enumerate(self.pending):
                last = i == len(self.pending) - 1
                cut = len(text) if everything or ticks or not last else text.rfind("\n") + 1
                if cut:
                    due.append((stream, text[:cut]))
                if cut < len(text):
                    keep.append([stream, text[cut:], ticks + 1])
            self.pending = keep
        return due

    def send(self, everything):
        for stream, text in self.take(everything):
            self.driver.send({"seq": self.seq, "stream": stream, "text": text})

    def loop(self):
        while not self.stop.wait(LIVE_INTERVAL):
            self.send(False)

    def close(self):
        self.stop.set()
        self.thread.join()
        with self.lock:
            self.closed = True
        self.send(True)


class Driver:
    def __init__(self):
        # The protocol keeps private descriptors: fd 0 becomes /dev/null so
        # neither user code nor its subprocesses can eat a request, and the
        # reply channel is a non-inheritable copy of fd 1.
        self.rx = os.fdopen(os.dup(0), "rb")
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdin = open(os.devnull, "r")
        self.tx = os.fdopen(os.dup(1), "wb")
        self.tx_lock = threading.Lock()
        self.nonce = self.rx.readline().strip().decode("ascii", "replace")
        self.count = 0
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        self.ns = main.__dict__
        os.environ.setdefault("MPLBACKEND", "Agg")
        # Debian's matplotlib looks for its rc file in /etc, which a
        # sandbox's synthetic /etc lacks: point it at the packaged copy.
        packaged = "/usr/share/matplotlib/mpl-data/matplotlibrc"
        if ("MATPLOTLIBRC" not in os.environ and not os.path.exists("/etc/matplotlibrc")
                and os.path.isfile(packaged)):
            os.environ["MATPLOTLIBRC"] = packaged

    def send(self, obj):
        data = json.dumps(obj, ensure_ascii=True, separators=(",", ":"))
        with self.tx_lock:
            self.tx.write(("%s %s\n" % (self.nonce, data)).encode("ascii"))
            self.tx.flush()

    def compile_cell(self, code, name):
        """Exec all statements but the last; eval the last if it is an
        expression, as a notebook cell shows its value."""
        tree = ast.parse(code, filename=name, mode="exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        body = compile(tree, name, "exec")
        return body, (compile(last, name, "eval") if last is not None else None)

    def error_of(self, e):
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
            tb = tb.tb_next  # the driver's own frames
        lines = traceback.format_exception(type(e), e, tb)
        return {"name": type(e).__name__, "value": str(e), "traceback": "".join(lines)}

    def figures(self):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return []
        out, total = [], 0
        try:
            for num in plt.get_fignums():
                buf = io.BytesIO()
                plt.figure(num).savefig(buf, format="png")
                png = buf.getvalue()
                total += len(png)
                if total <= MAX_IMAGES_BYTES:
                    out.append({"mime_type": "image/png",
                                "data": base64.b64encode(png).decode("ascii")})
            plt.close("all")
        except Exception as e:  # a broken figure must not break the context
            print("sbx: could not render a figure: %r" % (e,), file=sys.stderr)
        return out

    def run(self, req):
        self.count += 1
        name = "<cell-%d>" % self.count
        code = req.get("code", "")
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        cap = int(req.get("max_output", 1 << 20))
        live = Live(self, req.get("seq"), cap) if req.get("stream") is True else None
        out, err = Capture(cap, live, "stdout"), Capture(cap, live, "stderr")
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        result, error = None, None
        try:
            body, last = self.compile_cell(code, name)
            exec(body, self.ns)
            if last is not None:
                value = eval(last, self.ns)
                if value is not None:
                    self.ns["_"] = value
                    result = repr(value)
                    if len(result) > MAX_RESULT:
                        result = result[:MAX_RESULT] + "…"
        except BaseException as e:  # SystemExit and KeyboardInterrupt too: the context lives on
            error = self.error_of(e)
        outputs = self.figures()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        sys.stdout, sys.stderr = saved
        if live is not None:
            live.close()
        self.send({"seq": req.get("seq"), "stdout": out.value(), "stderr": err.value(),
                   "stdout_truncated": out.dropped > 0, "stderr_truncated": err.dropped > 0,
                   "result": result, "outputs": outputs, "error": error,
                   "execution_count": self.count})

    def serve(self):
        self.send({"hello": True, "language": "python",
                   "version": sys.version.split()[0]})
        for line in self.rx:
            try:
                req = json.loads(line)
            except ValueError:
                continue
            if isinstance(req, dict) and req.get("op") == "run":
                self.run(req)


Driver().serve()
