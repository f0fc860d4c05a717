"""models.py — typed views of the API's JSON objects (schemas of
docs/api/openapi.yaml named by each class's `__schema__`).  Every object
keeps the whole JSON it came from in `raw`, so a field a newer daemon adds
is never lost.  A trailing `_` in an attribute (`class_`, `from_`) stands
for a Python keyword; `_json_names` maps the few others whose JSON key is
not a Python name (`api_version` ← `apiVersion`)."""
import base64
import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, Generic, Iterator, List, Optional, Type, TypeVar, Union

T = TypeVar("T")
M = TypeVar("M", bound="Model")

FINAL_EXECUTION_STATUSES = frozenset(
    {"succeeded", "failed", "timeout", "oom_killed", "killed", "error"})


class Model:
    __schema__: ClassVar[str] = ""
    raw: Dict[str, Any]
    _nested: ClassVar[Dict[str, Any]] = {}
    _lists: ClassVar[Dict[str, Any]] = {}
    _json_names: ClassVar[Dict[str, str]] = {}

    @classmethod
    def json_key(cls, attr: str) -> str:
        """The JSON key of an attribute."""
        return cls._json_names.get(attr) or (attr[:-1] if attr.endswith("_") else attr)

    @classmethod
    def from_dict(cls: Type[M], d: Dict[str, Any]) -> M:
        if not isinstance(d, dict):
            raise TypeError(f"{cls.__name__}: expected a JSON object, got {type(d).__name__}")
        kw = {}
        for f in dataclasses.fields(cls):
            if f.name == "raw":
                continue
            key = cls.json_key(f.name)
            if key not in d:
                continue
            v = d[key]
            if key in cls._nested and isinstance(v, dict):
                v = cls._nested[key].from_dict(v)
            elif key in cls._lists and isinstance(v, list):
                v = [cls._lists[key].from_dict(x) if isinstance(x, dict) else x for x in v]
            kw[f.name] = v
        obj = cls(**kw)
        obj.raw = d
        return obj

    def __getitem__(self, key: str) -> Any:
        """Dict-style access to the raw JSON (`ex["stdout"]`)."""
        return self.raw[key]


def _decode(text: Optional[str], encoding: Optional[str]) -> bytes:
    if text is None:
        return b""
    return base64.b64decode(text) if encoding == "base64" else text.encode("utf-8")


@dataclass
class Limits(Model):
    __schema__ = "Limits"
    cpu: Optional[str] = None
    memory: Optional[str] = None
    disk: Optional[str] = None
    pids: Optional[int] = None
    timeout_s: Optional[int] = None
    output_bytes: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Network(Model):
    __schema__ = "Network"
    egress: str = "none"
    allow: List[str] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Profile(Model):
    __schema__ = "Profile"
    _nested = {"limits": Limits, "max_limits": Limits}
    name: str = ""
    driver: str = ""
    class_: str = ""
    image: str = ""
    available: bool = False
    state: str = ""
    capabilities: List[str] = field(default_factory=list)
    limits: Optional[Limits] = None
    max_limits: Optional[Limits] = None
    default_timeout_s: Optional[int] = None
    pool_size: Optional[int] = None
    default: bool = False
    reason: Optional[str] = None
    platform: Optional[str] = None
    platform_note: Optional[str] = None
    accel: Optional[str] = None  # dedicated-kernel profiles (microvm, kata): kvm or tcg
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ProfileList(Model):
    __schema__ = "ProfileList"
    _lists = {"profiles": Profile}
    profiles: List[Profile] = field(default_factory=list)
    default: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    def get(self, name: str) -> Optional[Profile]:
        return next((p for p in self.profiles if p.name == name), None)


@dataclass
class Session(Model):
    __schema__ = "Session"
    _nested = {"limits": Limits, "network": Network}
    id: str = ""
    status: str = ""
    reason: Optional[str] = None
    profile: str = ""
    runtime: str = ""
    image: str = ""
    limits: Optional[Limits] = None
    network: Optional[Network] = None
    capabilities: List[str] = field(default_factory=list)
    created_at: str = ""
    expires_at: str = ""
    updated_at: str = ""
    metadata: Dict[str, str] = field(default_factory=dict)
    ttl_s: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ResultError(Model):
    __schema__ = "ResultError"
    reason: str = ""
    message: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ExecUsage(Model):
    __schema__ = "ExecUsage"
    cpu_seconds: float = 0.0
    memory_peak_bytes: int = 0
    oom_kills: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


class _Output:
    stdout: str
    stdout_encoding: str
    stderr: str
    stderr_encoding: str

    @property
    def stdout_bytes(self) -> bytes:
        """stdout as bytes, base64-decoded when it was not UTF-8."""
        return _decode(self.stdout, self.stdout_encoding)

    @property
    def stderr_bytes(self) -> bytes:
        return _decode(self.stderr, self.stderr_encoding)


@dataclass
class ExecResult(Model, _Output):
    __schema__ = "ExecResult"
    _nested = {"usage": ExecUsage, "error": ResultError}
    status: str = ""
    reason: str = ""
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    stdout: str = ""
    stdout_encoding: str = "utf-8"
    stderr: str = ""
    stderr_encoding: str = "utf-8"
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_dropped_bytes: int = 0
    stderr_dropped_bytes: int = 0
    duration_ms: int = 0
    usage: Optional[ExecUsage] = None
    error: Optional[ResultError] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class FileInfo(Model):
    __schema__ = "FileInfo"
    path: str = ""
    size: int = 0
    sha256: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ExecutionUsage(Model):
    __schema__ = "ExecutionUsage"
    cpu_seconds: float = 0.0
    memory_mb_seconds: float = 0.0
    duration_seconds: float = 0.0
    memory_peak_bytes: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ExecutionCreated(Model):
    __schema__ = "ExecutionCreated"
    id: str = ""
    status: str = ""
    profile: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Execution(Model, _Output):
    __schema__ = "Execution"
    _nested = {"usage": ExecutionUsage, "error": ResultError}
    _lists = {"files": FileInfo}
    id: str = ""
    status: str = ""
    reason: Optional[str] = None
    profile: str = ""
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    stdout: str = ""
    stdout_encoding: str = "utf-8"
    stderr: str = ""
    stderr_encoding: str = "utf-8"
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_dropped_bytes: int = 0
    stderr_dropped_bytes: int = 0
    files: List[FileInfo] = field(default_factory=list)
    usage: Optional[ExecutionUsage] = None
    created_at: str = ""
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    error: Optional[ResultError] = None
    metadata: Dict[str, str] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def done(self) -> bool:
        return self.status in FINAL_EXECUTION_STATUSES


@dataclass
class Page(Generic[T]):
    """One page of a list; `next_cursor` is None on the last one (a
    string for sessions and executions, the last seq for audit events)."""
    items: List[T]
    next_cursor: Union[str, int, None]

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class DirEntry(Model):
    __schema__ = "DirEntry"
    name: str = ""
    path: str = ""
    type: str = ""
    size: int = 0
    mode: str = ""
    mtime: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class FileStat(Model):
    __schema__ = "FileStat"
    name: str = ""
    path: str = ""
    type: str = ""
    size: int = 0
    mode: str = ""
    mtime: int = 0
    link_target: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class FileWritten(Model):
    __schema__ = "FileWritten"
    path: str = ""
    size: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ArchiveExtracted(Model):
    __schema__ = "ArchiveExtracted"
    path: str = ""
    entries: int = 0
    bytes: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Process(Model):
    __schema__ = "Process"
    pid: int = 0
    command: List[str] = field(default_factory=list)
    status: str = ""
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    pty: Any = False
    result_status: Optional[str] = None
    reason: Optional[str] = None
    usage: Any = None
    stdout_bytes: Optional[int] = None
    stderr_bytes: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ProcessOutput(Model):
    """The kept output of a background process from the asked offsets.
    The schema (ProcessOutput) describes these keys in prose only."""
    __schema__ = "ProcessOutput"
    stdout: str = ""
    stdout_encoding: str = "utf-8"
    stdout_offset: int = 0
    stdout_next_offset: int = 0
    stdout_dropped_bytes: int = 0
    stdout_skipped: bool = False
    stdout_gap_at: Optional[int] = None
    stderr: str = ""
    stderr_encoding: str = "utf-8"
    stderr_offset: int = 0
    stderr_next_offset: int = 0
    stderr_dropped_bytes: int = 0
    stderr_skipped: bool = False
    stderr_gap_at: Optional[int] = None
    status: str = ""
    result: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Context(Model):
    __schema__ = "Context"
    id: str = ""
    language: str = ""
    status: str = ""
    session_id: str = ""
    execution_count: int = 0
    version: str = ""
    error: Optional[str] = None
    created_at: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ContextRunResult(Model, _Output):
    __schema__ = "ContextRunResult"
    status: str = ""
    reason: str = ""
    stdout: str = ""
    stdout_encoding: str = "utf-8"
    stderr: str = ""
    stderr_encoding: str = "utf-8"
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    result: Optional[str] = None
    outputs: List[Dict[str, str]] = field(default_factory=list)
    error: Optional[Dict[str, str]] = None
    duration_ms: int = 0
    execution_count: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Image(Model):
    __schema__ = "listImages"  # inline schema: GET /v1/sandbox/images → images[]
    ref: str = ""
    digest: str = ""
    config: Optional[str] = None
    layers: List[str] = field(default_factory=list)
    size: Optional[int] = None
    created: Any = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class UsageGroup(Model):
    __schema__ = "UsageGroup"
    key: Optional[str] = None
    records: int = 0
    cpu_seconds: float = 0.0
    memory_mb_seconds: float = 0.0
    duration_seconds: float = 0.0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class UsageReport(Model):
    __schema__ = "UsageReport"
    _lists = {"groups": UsageGroup}
    group_by: str = ""
    from_: str = ""
    to: Optional[str] = None
    groups: List[UsageGroup] = field(default_factory=list)
    total: Dict[str, Any] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class AuditEvent(Model):
    __schema__ = "AuditEvent"
    seq: int = 0
    time: str = ""
    time_ms: int = 0
    tenant_id: int = 0
    actor: str = ""
    action: str = ""
    target: str = ""
    outcome: str = ""
    details: Dict[str, Any] = field(default_factory=dict)
    prev_hash: str = ""
    hash: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class AuditVerdict(Model):
    __schema__ = "AuditVerdict"
    ok: bool = False
    events: int = 0
    last_seq: int = 0
    head_hash: str = ""
    first_broken_seq: Optional[int] = None
    problem: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Violation(Model):
    """One JSON Schema violation: `path` is the JSON pointer of the value at
    fault ("" for the whole document; under "/input" for a tool's input),
    `message` in the request's language, `index` the document of an apply
    it belongs to (None elsewhere).  The items of ContractValidation's
    `violations` and of an error's `details.violations`."""
    __schema__ = "Violation"
    path: str = ""
    message: str = ""
    message_i18n: Dict[str, str] = field(default_factory=dict)
    index: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ContractValidation(Model):
    """POST /v1/contracts/{name}/validate: `valid` exactly when `violations` is empty."""
    __schema__ = "ContractValidation"
    _lists = {"violations": Violation}
    valid: bool = False
    violations: List[Violation] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ToolManifest(Model):
    """A `tool-manifest` document (contracts/v1/tool-manifest.schema.json,
    docs/contracts.md): `metadata` {name, description, labels} and `spec`
    {sandbox_profile, image, command | language + entrypoint, input_schema,
    limits, network, collect, timeout_s}.  Build one with
    ToolManifest.build(…) (or pass a plain dict to tools.apply), or read
    one from Tool.manifest."""
    __schema__ = "ToolManifest"
    _json_names = {"api_version": "apiVersion"}
    metadata: Dict[str, Any] = field(default_factory=dict)
    spec: Dict[str, Any] = field(default_factory=dict)
    api_version: str = "sandboxd/v1"
    kind: str = "Tool"
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, name: str, *, profile: str, image: str,
              command: Optional[List[str]] = None, language: Optional[str] = None,
              entrypoint: Optional[str] = None, input_schema: Optional[Dict[str, Any]] = None,
              limits: Optional[Dict[str, Any]] = None, network: Optional[Dict[str, Any]] = None,
              collect: Optional[List[str]] = None, timeout_s: Optional[float] = None,
              description: Optional[str] = None,
              labels: Optional[Dict[str, str]] = None) -> "ToolManifest":
        """A manifest from keyword arguments (those left at None are not
        sent); description says what the tool does (MCP clients show it)."""
        spec = {"sandbox_profile": profile, "image": image, "command": command,
                "language": language, "entrypoint": entrypoint, "input_schema": input_schema,
                "limits": limits, "network": network, "collect": collect, "timeout_s": timeout_s}
        meta: Dict[str, Any] = {"name": name}
        if description is not None:
            meta["description"] = description
        if labels is not None:
            meta["labels"] = dict(labels)
        return cls(metadata=meta, spec={k: v for k, v in spec.items() if v is not None})

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    def to_dict(self) -> Dict[str, Any]:
        """The document as JSON (what tools.apply sends)."""
        return {"apiVersion": self.api_version, "kind": self.kind,
                "metadata": dict(self.metadata), "spec": dict(self.spec)}


@dataclass
class Tool(Model):
    """A tool of the tenant: its manifest as stored, `generation` (1 when
    created, one more at each change) and `digest`."""
    __schema__ = "Tool"
    _nested = {"manifest": ToolManifest}
    name: str = ""
    profile: str = ""
    image: str = ""
    generation: int = 0
    digest: str = ""
    manifest: Optional[ToolManifest] = None
    created_at: str = ""
    updated_at: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ToolApplied(Model):
    """What applying one document did: `action` created, updated or unchanged."""
    __schema__ = "ToolApplied"
    _nested = {"tool": Tool}
    name: str = ""
    action: str = ""
    tool: Optional[Tool] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ManifestApplyResult(Model):
    """POST /v1/manifests/apply: one result per document, in the order given."""
    __schema__ = "ManifestApplyResult"
    _lists = {"results": ToolApplied}
    dry_run: bool = False
    results: List[ToolApplied] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class ToolInvoked(Model):
    """POST /v1/tools/{name}/invoke: the queued execution (`id`)."""
    __schema__ = "ToolInvoked"
    id: str = ""
    status: str = ""
    profile: str = ""
    tool: str = ""
    generation: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class StreamEvent:
    """One event of an exec or process-output stream: `stdout`/`stderr`
    (`data`: {data|data_base64, offset}), `gap`, or `exit` (`result`)."""
    event: str
    data: Any
    result: Optional[ExecResult] = None

    @property
    def bytes(self) -> bytes:
        d = self.data or {}
        if "data_base64" in d:
            return base64.b64decode(d["data_base64"])
        return str(d.get("data", "")).encode("utf-8")

    @property
    def text(self) -> str:
        return self.bytes.decode("utf-8", "replace")

    @property
    def offset(self) -> Optional[int]:
        return (self.data or {}).get("offset") if isinstance(self.data, dict) else None


@dataclass
class WatchEvent:
    """One event of a watch stream: ready, create, modify, delete, move
    (`from_`, `to`), overflow (`dropped`) or end (`reason`)."""
    event: str
    data: Dict[str, Any]

    @property
    def type(self) -> str:
        return self.data.get("type", self.event) if isinstance(self.data, dict) else self.event

    @property
    def path(self) -> Optional[str]:
        return self.data.get("path") if isinstance(self.data, dict) else None
