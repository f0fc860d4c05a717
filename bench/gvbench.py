"""gvbench.py — the bare-runsc peers of issue 6's rows: a container started
with `runsc run -detach` from a minimal OCI bundle (the host's / read-only,
no network, platform as the daemon chose), into which `runsc exec … true`
is timed — what a driver that ran one `runsc exec` per command would pay,
against our exec as a message to sbx-init inside a live gVisor sandbox.
`runsc do true` (a whole sandbox per command) is the peer in bench.py."""
import json
import os
import subprocess

from daemon import Failed, first_line


class RunscContainer:
    def __init__(self, tmp, platform="ptrace"):
        self.dir = os.path.join(tmp, "runsc-peer")
        self.root = os.path.join(self.dir, "state")
        self.id = "sbxbench%d" % os.getpid()
        self.platform = platform
        self.started = False

    def g(self, *args):
        """runsc with the global flags of this peer."""
        return ["runsc", "--root=" + self.root, "--rootless=false", "--network=none",
                "--platform=" + self.platform] + list(args)

    def _run(self, argv, timeout=60):
        # Output to a file, not a pipe: `run -detach` leaves the sandbox and
        # the gofer holding it, so a pipe would never see EOF.
        log = os.path.join(self.dir, "runsc.log")
        try:
            with open(log, "w") as out:
                r = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                                   stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise Failed(first_line(str(e)))
        if r.returncode != 0:
            with open(log) as f:
                what = [a for a in argv[1:] if not a.startswith("-")][:1]
                raise Failed("runsc %s: %s" % (" ".join(what),
                                               first_line(f.read(), "exit %d" % r.returncode)))

    def start(self):
        os.makedirs(self.root, exist_ok=True)
        self._run(["runsc", "spec", "-bundle", self.dir, "--", "sleep", "100000"])
        path = os.path.join(self.dir, "config.json")
        with open(path) as f:
            spec = json.load(f)
        spec["root"] = {"path": "/", "readonly": True}
        spec["process"]["terminal"] = False
        with open(path, "w") as f:
            json.dump(spec, f)
        self.started = True  # from here on stop() cleans up, even after a failure
        self._run(self.g("run", "-detach", "-bundle", self.dir, self.id), timeout=120)
        self._run(self.exec_argv())  # once, to catch errors before timing
        return self

    def exec_argv(self):
        return self.g("exec", self.id, "true")

    def stop(self):
        if not self.started:
            return
        for args in (("kill", self.id, "KILL"), ("delete", "-force", self.id)):
            try:
                subprocess.run(self.g(*args), capture_output=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.started = False
