"""sandboxd — the Python client of the sandboxd API (standard library only).

    from sandboxd import Client
    client = Client(base_url="http://127.0.0.1:8080", api_key="sbx_k…")
    ex = client.sandbox.execute("python:3.12-slim", ["python", "-c", "print(1)"],
                                profile="gvisor")
    print(ex.status, ex.exit_code, ex.stdout)
"""
import contextlib
from typing import Iterator, Optional

from ._http import __version__, current_traceparent
from .client import (Audit, BackgroundProcess, Client, ContextHandle, Contexts, Contracts,
                     Executions, Files_ as SessionFiles, Images, Processes, Sandbox,
                     SandboxSession, Sessions, Tools)
from .errors import (APIError, BadGatewayError, ConflictError, ERRORS_BY_CODE, ForbiddenError,
                     InternalError, InvalidRequestError, MethodNotAllowedError, NotFoundError,
                     NotReadyError, PayloadTooLargeError, QuotaExceededError, RateLimitedError,
                     RuntimeUnavailableError, SandboxdError, TimeoutError, TransportError,
                     UnauthenticatedError)
from .models import (ArchiveExtracted, AuditEvent, AuditVerdict, Context, ContextRunResult,
                     ContractValidation, DirEntry, ExecResult, Execution, ExecutionCreated,
                     FileInfo, FileStat, FileWritten, Image, Limits, ManifestApplyResult,
                     Network, Page, Process, ProcessOutput, Profile, ProfileList, Session,
                     StreamEvent, Tool, ToolApplied, ToolInvoked, ToolManifest, UsageReport,
                     Violation, WatchEvent)


@contextlib.contextmanager
def trace(traceparent: Optional[str]) -> Iterator[None]:
    """Requests made inside the block carry this W3C traceparent (per
    thread / asyncio task), whatever the client was built with."""
    tok = current_traceparent.set(traceparent)
    try:
        yield
    finally:
        current_traceparent.reset(tok)


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("contextlib", "Iterator",
                                                                    "Optional")]
