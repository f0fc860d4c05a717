"""client.py — the public API: Client and its resources (sandbox.execute
and executions, sessions with exec/streams/processes/files/archives/watch/
contexts, profiles, images, contracts, tools, usage, audit), each a thin,
typed layer over one operation of routes.ROUTES."""
import base64
import time
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union)

from . import errors
from ._http import EventStream, Response, Transport, TraceparentSource
from .models import (ArchiveExtracted, AuditEvent, AuditVerdict, Context, ContextRunResult,
                     ContractValidation, DirEntry, ExecResult, Execution, ExecutionCreated,
                     FileStat, FileWritten, Image, ManifestApplyResult, Page, Process,
                     ProcessOutput, ProfileList, Session, StreamEvent, Tool, ToolInvoked,
                     ToolManifest, UsageReport, WatchEvent)

Files = Union[None, Mapping[str, Union[str, bytes]], Sequence[Mapping[str, Any]]]
Command = Optional[Sequence[str]]


def _body(**kw: Any) -> Dict[str, Any]:
    """A request body without the arguments left at None."""
    extra = kw.pop("_extra", None) or {}
    out = {k: v for k, v in kw.items() if v is not None}
    out.update(extra)
    return out


def _input_files(files: Files) -> Optional[List[Dict[str, Any]]]:
    """{path: str|bytes} or a list of InputFile objects → InputFile list
    (bytes travel as base64)."""
    if files is None:
        return None
    if isinstance(files, Mapping):
        out = []
        for path, content in files.items():
            if isinstance(content, (bytes, bytearray)):
                out.append({"path": path, "content": base64.b64encode(content).decode(),
                            "encoding": "base64"})
            else:
                out.append({"path": path, "content": content})
        return out
    return [dict(f) for f in files]


def _as_bytes(data: Union[str, bytes]) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


class _Resource:
    def __init__(self, t: Transport):
        self._t = t


# ---- executions ---------------------------------------------------------------

class Executions(_Resource):
    """One-shot runs in a fresh sandbox each (POST /v1/sandbox/executions)."""

    def create(self, image: Optional[str] = None, command: Command = None, *,
               profile: Optional[str] = None, language: Optional[str] = None,
               code: Optional[str] = None, files: Files = None,
               collect: Optional[Sequence[str]] = None, stdin: Optional[str] = None,
               env: Optional[Mapping[str, str]] = None, limits: Optional[Mapping[str, Any]] = None,
               network: Optional[Mapping[str, Any]] = None,
               metadata: Optional[Mapping[str, str]] = None,
               extra: Optional[Mapping[str, Any]] = None) -> ExecutionCreated:
        """Queues an execution; answers at once with its id.  Never retried
        except on a 429/503 refusal, which stores nothing."""
        body = _body(profile=profile, image=image,
                     command=list(command) if command is not None else None,
                     language=language, code=code, files=_input_files(files),
                     collect=list(collect) if collect is not None else None, stdin=stdin,
                     env=dict(env) if env is not None else None,
                     limits=dict(limits) if limits is not None else None,
                     network=dict(network) if network is not None else None,
                     metadata=dict(metadata) if metadata is not None else None, _extra=extra)
        r = self._t.request("createExecution", json_body=body, expect=(202,))
        return ExecutionCreated.from_dict(r.json())

    def get(self, execution_id: str, wait_s: Optional[float] = None) -> Execution:
        """The execution; with wait_s (0–60) the daemon answers as soon as
        it is final or after wait_s seconds."""
        to = None if wait_s is None else self._t.timeout + wait_s
        r = self._t.request("getExecution", {"id": execution_id},
                            query={"wait_s": wait_s}, timeout=to)
        return Execution.from_dict(r.json())

    def wait(self, execution_id: str, timeout: Optional[float] = None,
             poll_s: float = 30.0) -> Execution:
        """Long-polls until the execution is final.  timeout: seconds in
        all (None: no bound); past it raises sandboxd.TimeoutError."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            w = poll_s if deadline is None else max(0.0, min(poll_s, deadline - time.monotonic()))
            ex = self.get(execution_id, wait_s=round(min(w, 60.0), 1))
            if ex.done:
                return ex
            if deadline is not None and time.monotonic() >= deadline:
                raise errors.TimeoutError(
                    f"execution {execution_id} still {ex.status} after {timeout}s")

    def cancel(self, execution_id: str) -> Execution:
        r = self._t.request("cancelExecution", {"id": execution_id}, timeout=self._t.timeout + 5)
        return Execution.from_dict(r.json())

    def list(self, status: Optional[str] = None, limit: Optional[int] = None,
             cursor: Optional[str] = None) -> Page[Execution]:
        d = self._t.request("listExecutions", query={"status": status, "limit": limit,
                                                     "cursor": cursor}).json()
        return Page([Execution.from_dict(x) for x in d["executions"]], d["next_cursor"])

    def iter(self, status: Optional[str] = None, page_size: int = 200) -> Iterator[Execution]:
        """Every execution of the tenant, newest first, following cursors."""
        cursor = None
        while True:
            page = self.list(status, page_size, cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def download(self, execution_id: str, path: str) -> bytes:
        """A collected file's bytes (path: one of `files[].path`)."""
        return self._t.request("getExecutionFile", {"id": execution_id},
                               query={"path": path}).body


class Sandbox(_Resource):
    """client.sandbox: execute, executions, sessions, profiles."""

    def __init__(self, t: Transport):
        super().__init__(t)
        self.executions = Executions(t)
        self.sessions = Sessions(t)

    def execute(self, image: Optional[str] = None, command: Command = None, *,
                profile: Optional[str] = None, limits: Optional[Mapping[str, Any]] = None,
                wait_timeout: Optional[float] = None, **kw: Any) -> Execution:
        """Creates an execution and waits for its final state (the seed's
        `client.sandbox.execute(image, command, profile=…, limits=…)`).
        Other keyword arguments are those of executions.create; wait_timeout
        bounds the wait (default: the run's own timeout plus a minute, else
        none)."""
        created = self.executions.create(image, command, profile=profile, limits=limits, **kw)
        if wait_timeout is None and limits and limits.get("timeout_s"):
            wait_timeout = float(limits["timeout_s"]) + 60 + 300  # + time spent queued
        return self.executions.wait(created.id, timeout=wait_timeout)

    def profiles(self) -> ProfileList:
        return ProfileList.from_dict(self._t.request("listProfiles").json())


# ---- sessions -----------------------------------------------------------------

def _exec_body(command: Command, language: Optional[str], code: Optional[str],
               stdin: Optional[str], env: Optional[Mapping[str, str]], cwd: Optional[str],
               timeout_s: Optional[float], extra: Optional[Mapping[str, Any]], **more: Any
               ) -> Dict[str, Any]:
    return _body(command=list(command) if command is not None else None, language=language,
                 code=code, stdin=stdin, env=dict(env) if env is not None else None, cwd=cwd,
                 timeout_s=timeout_s, _extra=extra, **more)


class Sessions(_Resource):
    def create(self, profile: Optional[str] = None, *, image: Optional[str] = None,
               limits: Optional[Mapping[str, Any]] = None,
               network: Optional[Mapping[str, Any]] = None,
               env: Optional[Mapping[str, str]] = None,
               metadata: Optional[Mapping[str, str]] = None, ttl_s: Optional[int] = None,
               extra: Optional[Mapping[str, Any]] = None) -> "SandboxSession":
        body = _body(profile=profile, image=image, limits=limits, network=network, env=env,
                     metadata=metadata, ttl_s=ttl_s, _extra=extra)
        r = self._t.request("createSession", json_body=body, expect=(201,),
                            timeout=max(self._t.timeout, 120))
        return SandboxSession(self._t, Session.from_dict(r.json()))

    def get(self, session_id: str) -> "SandboxSession":
        r = self._t.request("getSession", {"id": session_id})
        return SandboxSession(self._t, Session.from_dict(r.json()))

    def session(self, session_id: str) -> "SandboxSession":
        """A handle on a session by id, without asking the daemon."""
        return SandboxSession(self._t, Session(id=session_id))

    def list(self, status: Optional[str] = None, limit: Optional[int] = None,
             cursor: Optional[str] = None) -> Page[Session]:
        d = self._t.request("listSessions", query={"status": status, "limit": limit,
                                                   "cursor": cursor}).json()
        return Page([Session.from_dict(x) for x in d["sessions"]], d["next_cursor"])

    def iter(self, status: Optional[str] = None, page_size: int = 200) -> Iterator[Session]:
        cursor = None
        while True:
            page = self.list(status, page_size, cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    _UNSET: Any = object()

    def update(self, session_id: str, *, network: Any = _UNSET, ttl_s: Optional[int] = None,
               metadata: Any = _UNSET) -> Session:
        """PATCH: only the given fields change (network=None resets the
        policy to none, metadata=None clears the labels)."""
        body: Dict[str, Any] = {}
        if network is not self._UNSET:
            body["network"] = network
        if metadata is not self._UNSET:
            body["metadata"] = metadata
        if ttl_s is not None:
            body["ttl_s"] = ttl_s
        return Session.from_dict(self._t.request("updateSession", {"id": session_id},
                                                 json_body=body).json())

    def delete(self, session_id: str) -> None:
        self._t.request("deleteSession", {"id": session_id}, expect=(204,))


class SandboxSession:
    """A live session: its last known state in `.info` (attribute access
    is forwarded to it: `s.id`, `s.status`), and its operations.  As a
    context manager, it is deleted on exit."""

    def __init__(self, t: Transport, info: Session):
        self._t = t
        self.info = info
        self.processes = Processes(t, info.id)
        self.files = Files_(t, info.id)
        self.contexts = Contexts(t, info.id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.info, name)

    def __repr__(self) -> str:
        return f"SandboxSession({self.info!r})"

    def __enter__(self) -> "SandboxSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.delete()

    def refresh(self) -> Session:
        self.info = Sessions(self._t).get(self.info.id).info
        return self.info

    def update(self, **kw: Any) -> Session:
        self.info = Sessions(self._t).update(self.info.id, **kw)
        return self.info

    def delete(self) -> None:
        Sessions(self._t).delete(self.info.id)

    def _http_timeout(self, timeout_s: Optional[float], timeout: Optional[float]) -> float:
        if timeout is not None:
            return timeout
        return max(self._t.timeout, (timeout_s or 300) + 30)

    def exec(self, command: Command = None, *, language: Optional[str] = None,
             code: Optional[str] = None, stdin: Optional[str] = None,
             env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
             timeout_s: Optional[float] = None, timeout: Optional[float] = None,
             extra: Optional[Mapping[str, Any]] = None) -> ExecResult:
        """Runs a command and waits for its result (a non-zero exit or a
        timeout is a result, not an exception).  timeout: the HTTP wait
        (default timeout_s + 30 s, or 330 s)."""
        body = _exec_body(command, language, code, stdin, env, cwd, timeout_s, extra)
        r = self._t.request("execInSession", {"id": self.info.id}, json_body=body,
                            timeout=self._http_timeout(timeout_s, timeout))
        return ExecResult.from_dict(r.json())

    def stream(self, command: Command = None, *, language: Optional[str] = None,
               code: Optional[str] = None, stdin: Optional[str] = None,
               env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
               timeout_s: Optional[float] = None, timeout: Optional[float] = None,
               extra: Optional[Mapping[str, Any]] = None) -> Iterator[StreamEvent]:
        """The same exec, streamed: StreamEvents `stdout`/`stderr` as the
        output is read, then `exit` whose `.result` is the ExecResult.
        Closing the iterator early disconnects, which kills the command."""
        body = _exec_body(command, language, code, stdin, env, cwd, timeout_s, extra)
        es = self._t.stream("execInSession", {"id": self.info.id}, json_body=body,
                            timeout=self._http_timeout(timeout_s, timeout))
        return _stream_events(es)

    def start(self, command: Command = None, *, language: Optional[str] = None,
              code: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
              cwd: Optional[str] = None, timeout_s: Optional[float] = None,
              pty: Optional[Mapping[str, int]] = None,
              extra: Optional[Mapping[str, Any]] = None) -> "BackgroundProcess":
        """Starts a background process (outlives this connection)."""
        body = _exec_body(command, language, code, None, env, cwd, timeout_s, extra,
                          background=True, pty=dict(pty) if pty is not None else None)
        r = self._t.request("execInSession", {"id": self.info.id}, json_body=body,
                            expect=(202,))
        return BackgroundProcess(self.processes, int(r.json()["pid"]))

    def archive(self, path: str, *, max_entries: Optional[int] = None,
                max_bytes: Optional[int] = None) -> bytes:
        """The tree under path as a tar (bytes)."""
        return self.files.archive_get(path, max_entries=max_entries, max_bytes=max_bytes)

    def watch(self, path: str, recursive: bool = False,
              timeout: Optional[float] = None) -> Iterator[WatchEvent]:
        return self.files.watch(path, recursive=recursive, timeout=timeout)


def _stream_events(es: Union[EventStream, Response]) -> Iterator[StreamEvent]:
    if isinstance(es, Response):
        raise errors.TransportError("the daemon answered without an event stream")
    with es:
        for ev, data in es:
            if ev == "exit":
                yield StreamEvent(ev, data, ExecResult.from_dict(data))
                return
            yield StreamEvent(ev, data)


class Processes:
    def __init__(self, t: Transport, sid: str):
        self._t, self._sid = t, sid

    def _p(self, pid: int) -> Dict[str, Any]:
        return {"id": self._sid, "pid": pid}

    def list(self) -> List[Process]:
        d = self._t.request("listProcesses", {"id": self._sid}).json()
        return [Process.from_dict(x) for x in d["processes"]]

    def get(self, pid: int) -> Process:
        return Process.from_dict(self._t.request("getProcess", self._p(pid)).json())

    def output(self, pid: int, offset: Optional[int] = None, *,
               stdout_offset: Optional[int] = None,
               stderr_offset: Optional[int] = None) -> ProcessOutput:
        q = {"offset": offset, "stdout_offset": stdout_offset, "stderr_offset": stderr_offset}
        return ProcessOutput.from_dict(self._t.request("getProcessOutput", self._p(pid),
                                                       query=q).json())

    def follow(self, pid: int, offset: Optional[int] = None, *,
               stdout_offset: Optional[int] = None, stderr_offset: Optional[int] = None,
               timeout: Optional[float] = None) -> Iterator[StreamEvent]:
        """Replays the kept output from the offsets, then follows it live;
        ends with `exit` (its `.result`) once the process has ended.
        Events: stdout, stderr, gap, exit.  timeout: the longest silence
        tolerated (None: wait as long as the process runs)."""
        q = {"offset": offset, "stdout_offset": stdout_offset, "stderr_offset": stderr_offset}
        es = self._t.stream("getProcessOutput", self._p(pid), query=q, timeout=timeout)
        return _stream_events(es)

    def stdin(self, pid: int, data: Union[str, bytes] = b"", eof: bool = False) -> Dict[str, Any]:
        """Appends data to the process's stdin; eof=True closes it after."""
        return self._t.request("writeProcessStdin", self._p(pid), body=_as_bytes(data),
                               query={"eof": True if eof else None}).json()

    def signal(self, pid: int, signal: Union[str, int] = "TERM") -> Dict[str, Any]:
        """Sends a signal by name (TERM, SIGINT, KILL, …) to the process group."""
        return self._t.request("signalProcess", self._p(pid),
                               json_body={"signal": str(signal)}).json()

    def resize(self, pid: int, cols: int, rows: int) -> None:
        self._t.request("resizeProcessTerminal", self._p(pid),
                        json_body={"cols": cols, "rows": rows})

    def wait(self, pid: int, timeout: Optional[float] = None) -> ExecResult:
        """Follows the output until the process ends; its result."""
        for ev in self.follow(pid, timeout=timeout):
            if ev.result is not None:
                return ev.result
        raise errors.TransportError(f"output stream of process {pid} ended without exit")


class BackgroundProcess:
    """A started background process: pid plus its operations."""

    def __init__(self, procs: Processes, pid: int):
        self._procs, self.pid = procs, pid

    def __repr__(self) -> str:
        return f"BackgroundProcess(pid={self.pid})"

    def get(self) -> Process:
        return self._procs.get(self.pid)

    def output(self, **kw: Any) -> ProcessOutput:
        return self._procs.output(self.pid, **kw)

    def follow(self, **kw: Any) -> Iterator[StreamEvent]:
        return self._procs.follow(self.pid, **kw)

    def stdin(self, data: Union[str, bytes] = b"", eof: bool = False) -> Dict[str, Any]:
        return self._procs.stdin(self.pid, data, eof)

    def signal(self, signal: Union[str, int] = "TERM") -> Dict[str, Any]:
        return self._procs.signal(self.pid, signal)

    def resize(self, cols: int, rows: int) -> None:
        self._procs.resize(self.pid, cols, rows)

    def wait(self, timeout: Optional[float] = None) -> ExecResult:
        return self._procs.wait(self.pid, timeout)


class Files_:
    """A session's files (paths absolute or relative to /work)."""

    def __init__(self, t: Transport, sid: str):
        self._t, self._sid = t, sid

    def _s(self) -> Dict[str, Any]:
        return {"id": self._sid}

    def put(self, path: str, data: Union[str, bytes]) -> FileWritten:
        r = self._t.request("writeSessionFile", self._s(), query={"path": path},
                            body=_as_bytes(data), expect=(201,))
        return FileWritten.from_dict(r.json())

    def get(self, path: str) -> bytes:
        return self._t.request("readSessionFile", self._s(), query={"path": path}).body

    def read_text(self, path: str) -> str:
        return self.get(path).decode("utf-8")

    def list(self, path: str = "/work", recursive: bool = False,
             max_depth: Optional[int] = None) -> List[DirEntry]:
        q = {"path": path, "list": True, "recursive": True if recursive else None,
             "max_depth": max_depth}
        d = self._t.request("readSessionFile", self._s(), query=q).json()
        return [DirEntry.from_dict(x) for x in d["entries"]]

    def stat(self, path: str) -> FileStat:
        d = self._t.request("readSessionFile", self._s(), query={"path": path, "stat": True})
        return FileStat.from_dict(d.json())

    def delete(self, path: str) -> None:
        self._t.request("deleteSessionFile", self._s(), query={"path": path}, expect=(204,))

    def mkdir(self, path: str, parents: bool = False, mode: Optional[str] = None) -> FileStat:
        r = self._t.request("makeSessionDirectory", self._s(),
                            query={"path": path, "parents": True if parents else None,
                                   "mode": mode})
        return FileStat.from_dict(r.json())

    def move(self, src: str, dst: str, overwrite: bool = False) -> FileStat:
        r = self._t.request("moveSessionFile", self._s(),
                            json_body={"from": src, "to": dst, "overwrite": overwrite})
        return FileStat.from_dict(r.json())

    def archive_get(self, path: str, *, max_entries: Optional[int] = None,
                    max_bytes: Optional[int] = None) -> bytes:
        q = {"path": path, "max_entries": max_entries, "max_bytes": max_bytes}
        return self._t.request("getSessionArchive", self._s(), query=q,
                               headers={"Accept": "application/x-tar"}).body

    def archive_put(self, path: str, tar: bytes, *, max_entries: Optional[int] = None,
                    max_bytes: Optional[int] = None) -> ArchiveExtracted:
        q = {"path": path, "max_entries": max_entries, "max_bytes": max_bytes}
        r = self._t.request("putSessionArchive", self._s(), query=q, body=bytes(tar),
                            content_type="application/x-tar", expect=(201,))
        return ArchiveExtracted.from_dict(r.json())

    def watch(self, path: str, recursive: bool = False,
              timeout: Optional[float] = None) -> Iterator[WatchEvent]:
        """File events under a directory: `ready` first, then create /
        modify / delete / move, `overflow`, and `end` last.  Closing the
        iterator drops the watch."""
        es = self._t.stream("watchSessionFiles", self._s(),
                            query={"path": path, "recursive": True if recursive else None},
                            timeout=timeout)

        def gen() -> Iterator[WatchEvent]:
            if isinstance(es, Response):
                raise errors.TransportError("the daemon answered without an event stream")
            with es:
                for ev, data in es:
                    yield WatchEvent(ev, data or {})
                    if ev == "end":
                        return
        return gen()


class Contexts:
    """Stateful interpreters (python, node) in a session."""

    def __init__(self, t: Transport, sid: str):
        self._t, self._sid = t, sid

    def _c(self, cid: str) -> Dict[str, Any]:
        return {"id": self._sid, "cid": cid}

    def create(self, language: str = "python") -> "ContextHandle":
        r = self._t.request("createContext", {"id": self._sid}, json_body={"language": language},
                            expect=(201,), timeout=max(self._t.timeout, 120))
        return ContextHandle(self, Context.from_dict(r.json()))

    def list(self) -> List[Context]:
        d = self._t.request("listContexts", {"id": self._sid}).json()
        return [Context.from_dict(x) for x in d["contexts"]]

    def get(self, cid: str) -> Context:
        return Context.from_dict(self._t.request("getContext", self._c(cid)).json())

    def run(self, cid: str, code: str, timeout_s: Optional[float] = None,
            timeout: Optional[float] = None) -> ContextRunResult:
        to = timeout if timeout is not None else max(self._t.timeout, (timeout_s or 300) + 30)
        r = self._t.request("runInContext", self._c(cid),
                            json_body=_body(code=code, timeout_s=timeout_s), timeout=to)
        return ContextRunResult.from_dict(r.json())

    def restart(self, cid: str) -> Context:
        return Context.from_dict(self._t.request("restartContext", self._c(cid),
                                                 timeout=max(self._t.timeout, 120)).json())

    def delete(self, cid: str) -> None:
        self._t.request("deleteContext", self._c(cid), expect=(204,))


class ContextHandle:
    def __init__(self, contexts: Contexts, info: Context):
        self._cs, self.info = contexts, info

    def __getattr__(self, name: str) -> Any:
        return getattr(self.info, name)

    def __repr__(self) -> str:
        return f"ContextHandle({self.info!r})"

    def run(self, code: str, timeout_s: Optional[float] = None) -> ContextRunResult:
        return self._cs.run(self.info.id, code, timeout_s)

    def restart(self) -> Context:
        self.info = self._cs.restart(self.info.id)
        return self.info

    def refresh(self) -> Context:
        self.info = self._cs.get(self.info.id)
        return self.info

    def delete(self) -> None:
        self._cs.delete(self.info.id)


# ---- contracts and tools ---------------------------------------------------------

class Contracts(_Resource):
    """Named JSON Schema contracts (today `tool-manifest`, docs/contracts.md)
    and validation against them; any tenant's key, nothing is stored."""

    def list(self) -> List[str]:
        """The contract names."""
        return [str(n) for n in self._t.request("listContracts").json()["contracts"]]

    def get(self, name: str) -> Dict[str, Any]:
        """The contract's JSON Schema (draft-07), as served
        (application/schema+json)."""
        return self._t.request("getContract", {"name": name},
                               headers={"Accept": "application/schema+json, application/json"}
                               ).json()

    def validate(self, name: str, document: Any) -> ContractValidation:
        """Every violation of document (any JSON value: a dict, a list, a
        ToolManifest, …) against the contract, each with the JSON pointer
        of the value at fault.  A bad document is a result (`valid` False),
        not an exception."""
        if isinstance(document, ToolManifest):
            document = document.to_dict()
        if document is None:  # JSON null is a document too
            r = self._t.request("validateContract", {"name": name}, body=b"null",
                                content_type="application/json")
        else:
            r = self._t.request("validateContract", {"name": name}, json_body=document)
        return ContractValidation.from_dict(r.json())


Manifest = Union[ToolManifest, Mapping[str, Any]]


def _manifest(m: Manifest) -> Dict[str, Any]:
    return m.to_dict() if isinstance(m, ToolManifest) else dict(m)


class Tools(_Resource):
    """Tools applied from tool manifests and run as executions in their
    `spec.sandbox_profile` (client.tools; docs/sdk/python.md, "Tools")."""

    def apply(self, manifests: Union[Manifest, Sequence[Manifest]],
              dry_run: bool = False) -> ManifestApplyResult:
        """Creates or updates tools: one manifest (a ToolManifest or a
        dict), or a list of 1 to 64 applied all or nothing.  Idempotent per
        name: each result's `action` is created, updated or unchanged.
        dry_run: check and report, store nothing.  A bad document raises
        InvalidRequestError whose `.violations` lists every violation
        (`index` the document, `path` in it)."""
        body: Dict[str, Any]
        if isinstance(manifests, (ToolManifest, Mapping)):
            body = _manifest(manifests)
        else:
            body = {"items": [_manifest(m) for m in manifests]}
        r = self._t.request("applyManifests", query={"dry_run": True if dry_run else None},
                            json_body=body)
        return ManifestApplyResult.from_dict(r.json())

    def list(self, limit: Optional[int] = None, cursor: Optional[str] = None) -> Page[Tool]:
        """A page of the tenant's tools, in name order."""
        d = self._t.request("listTools", query={"limit": limit, "cursor": cursor}).json()
        return Page([Tool.from_dict(x) for x in d["tools"]], d["next_cursor"])

    def iter(self, page_size: int = 200) -> Iterator[Tool]:
        """Every tool of the tenant, in name order, following cursors."""
        cursor = None
        while True:
            page = self.list(page_size, cursor)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = str(page.next_cursor)

    def get(self, name: str) -> Tool:
        """The tool with its manifest (NotFoundError when there is none)."""
        return Tool.from_dict(self._t.request("getTool", {"name": name}).json())

    def delete(self, name: str) -> None:
        """Deletes the tool; executions it started run on."""
        self._t.request("deleteTool", {"name": name}, expect=(204,))

    def invoke(self, name: str, input: Any = None,
               metadata: Optional[Mapping[str, str]] = None) -> ToolInvoked:
        """Queues an execution of the tool with this input (any JSON value
        its input_schema accepts; None sends none: the daemon's default,
        {}), which the program reads as JSON on its stdin.  Answers at once
        with the execution's id.  An input the schema refuses raises
        InvalidRequestError whose `.violations` have paths under /input."""
        body = _body(input=input, metadata=dict(metadata) if metadata is not None else None)
        r = self._t.request("invokeTool", {"name": name}, json_body=body, expect=(202,))
        return ToolInvoked.from_dict(r.json())

    def run(self, name: str, input: Any = None, *,
            metadata: Optional[Mapping[str, str]] = None,
            timeout: Optional[float] = None) -> Execution:
        """invoke, then waits for the execution's final state (long-polls,
        as sandbox.execute does) and returns it: its stdout, exit code,
        collected files.  timeout: seconds for the whole wait (None: no
        bound); past it raises sandboxd.TimeoutError."""
        invoked = self.invoke(name, input, metadata)
        return Executions(self._t).wait(invoked.id, timeout=timeout)


# ---- images, usage, audit -------------------------------------------------------

class Images(_Resource):
    def list(self) -> List[Image]:
        return [Image.from_dict(x) for x in self._t.request("listImages").json()["images"]]

    def pull(self, ref: str, progress: Optional[Callable[[Dict[str, Any]], None]] = None,
             timeout: Optional[float] = 1800) -> Dict[str, Any]:
        """Pulls an image (admin key); answers {ref, digest} once stored.
        progress: called with each `progress` event {blob, done, total}."""
        if progress is None:
            return self._t.request("pullImage", json_body={"ref": ref}, timeout=timeout).json()
        es = self._t.stream("pullImage", json_body={"ref": ref}, timeout=timeout)
        if isinstance(es, Response):  # an answer without a stream
            return dict(es.json())
        with es:
            for ev, data in es:
                if ev == "progress":
                    progress(data)
                elif ev == "done":
                    return dict(data)
                elif ev == "error":
                    raise errors.error_from_envelope(502 if data.get("code") == "bad_gateway"
                                                     else 500, {"error": data},
                                                     request_id=es.request_id)
        raise errors.TransportError(f"pull of {ref}: stream ended without done or error")

    def delete(self, ref: str) -> None:
        self._t.request("deleteImage", {"ref*": ref}, expect=(204,))

    def gc(self) -> Dict[str, Any]:
        return self._t.request("collectImageGarbage").json()


class Audit(_Resource):
    def list(self, tenant: Optional[int] = None, action: Optional[str] = None,
             after: Optional[int] = None, limit: Optional[int] = None) -> Page[AuditEvent]:
        d = self._t.request("listAuditEvents", query={"tenant": tenant, "action": action,
                                                      "after": after, "limit": limit}).json()
        return Page([AuditEvent.from_dict(x) for x in d["events"]], d["next_cursor"])

    def iter(self, tenant: Optional[int] = None, action: Optional[str] = None,
             after: Optional[int] = None) -> Iterator[AuditEvent]:
        while True:
            page = self.list(tenant, action, after, 1000)
            yield from page.items
            if page.next_cursor is None:
                return
            after = int(page.next_cursor)

    def verify(self) -> AuditVerdict:
        return AuditVerdict.from_dict(self._t.request("verifyAudit",
                                                      timeout=max(self._t.timeout, 300)).json())


class Client:
    """sandboxd client.  base_url and api_key default to SANDBOXD_URL and
    SANDBOXD_API_KEY (then http://127.0.0.1:8080).  language="fr" asks
    for French error messages.  timeout: seconds per HTTP request (longer
    calls such as exec and long-polls stretch it to their own bound).
    max_retries: bounded retries on 429/503 refusals and connection
    failures (see docs/sdk/python.md).  traceparent: a W3C traceparent,
    or a callable returning the current one."""

    def __init__(self, base_url: Optional[str] = None, api_key: Optional[str] = None, *,
                 language: Optional[str] = None, timeout: float = 60.0, max_retries: int = 4,
                 backoff: float = 0.25, max_backoff: float = 8.0,
                 traceparent: TraceparentSource = None,
                 on_retry: Optional[Callable[[Dict[str, Any]], None]] = None, **kw: Any):
        self._t = Transport(base_url, api_key, language=language, timeout=timeout,
                            max_retries=max_retries, backoff=backoff, max_backoff=max_backoff,
                            traceparent=traceparent, on_retry=on_retry, **kw)
        self.sandbox = Sandbox(self._t)
        self.images = Images(self._t)
        self.contracts = Contracts(self._t)
        self.tools = Tools(self._t)
        self.audit = Audit(self._t)

    @property
    def base_url(self) -> str:
        return self._t.base_url

    def with_options(self, **kw: Any) -> "Client":
        """A copy with some options changed (language="fr", timeout=5, …)."""
        t = self._t
        opts: Dict[str, Any] = dict(language=t.language, timeout=t.timeout,
                                    max_retries=t.max_retries, backoff=t.backoff,
                                    max_backoff=t.max_backoff, traceparent=t.traceparent,
                                    on_retry=t.on_retry)
        opts.update(kw)
        return Client(t.base_url, t.api_key, **opts)

    def close(self) -> None:
        """Closes the idle keep-alive connection of the calling thread."""
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def healthz(self) -> Dict[str, Any]:
        return self._t.request("healthz").json()

    def readyz(self) -> Dict[str, Any]:
        """The readiness report (also when not ready: 503 is not raised)."""
        try:
            return self._t.request("readyz").json()
        except errors.APIError as e:
            if e.status == 503 and isinstance(e.body, dict) and "checks" in e.body:
                return e.body
            raise

    def profiles(self) -> ProfileList:
        return self.sandbox.profiles()

    def usage(self, group_by: Optional[str] = None, from_: Any = None,
              to: Any = None) -> UsageReport:
        d = self._t.request("getUsage", query={"group_by": group_by, "from": from_, "to": to})
        return UsageReport.from_dict(d.json())
