# python_driver.py — the interpreter side of a Python context.
# Embedded into sandboxd at build time (gen_drivers.py) and started inside
# the sandbox as `python3 -u -c <this file>`.  Standard library only.
#
# Protocol (core/contexts.c is the other end):
#   stdin, first line: the context's nonce (32 hex digits).
#   stdin, then one JSON object per line: {"op": "run", "seq": N,
#     "code": "...", "max_output": BYTES}.
#   stdout: frames "<nonce> <json>\n": first {"hello": ...}, then one reply
#     per run: {"seq", "stdout", "stderr", "stdout_truncated",
#     "stderr_truncated", "result", "outputs", "error", "execution_count"}.
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
import traceback
import types

MAX_RESULT = 1 << 20          # characters of repr() kept
MAX_IMAGES_BYTES = 16 << 20   # PNG bytes per run


class Capture(io.TextIOBase):
    """A text stream keeping the head and the tail of what is written."""

    def __init__(self, cap):
        super().__init__()
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
        out, err = Capture(cap), Capture(cap)
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
