"""errors.py — the exceptions of the SDK: one class per error-envelope code
of the API (`{"error": {code, message, message_i18n, request_id, details}}`),
plus the transport's own (timeouts, connection failures)."""
from typing import Any, Dict, List, Optional

from .models import Violation


class SandboxdError(Exception):
    """Base of every error this SDK raises."""


class TransportError(SandboxdError):
    """The daemon could not be reached, or the connection broke."""


class TimeoutError(TransportError):  # noqa: A001 - deliberately shadows the builtin in this module
    """The client-side timeout ran out before the daemon answered."""


class APIError(SandboxdError):
    """An error envelope from the daemon."""

    code = "api_error"

    def __init__(self, status: int, code: str, message: str,
                 message_i18n: Optional[Dict[str, str]] = None,
                 request_id: Optional[str] = None, details: Optional[Dict[str, Any]] = None,
                 retry_after: Optional[float] = None, body: Any = None):
        super().__init__(f"{status} {code}: {message}" +
                         (f" (request {request_id})" if request_id else ""))
        self.status = status
        self.code = code
        self.message = message
        self.message_i18n = dict(message_i18n or {})
        self.request_id = request_id
        self.details = dict(details or {})
        self.retry_after = retry_after
        self.body = body

    @property
    def field(self) -> Optional[str]:
        """`details.field` of a validation error."""
        return self.details.get("field")

    @property
    def violations(self) -> List[Violation]:
        """`details.violations`: every JSON Schema violation of a manifest
        apply or a tool's input (each with `path`, `message`, and `index`
        of the document in an apply); [] for other errors."""
        vs = self.details.get("violations")
        return [Violation.from_dict(v) for v in vs if isinstance(v, dict)] \
            if isinstance(vs, list) else []


class InvalidRequestError(APIError):
    code = "invalid_request"


class UnauthenticatedError(APIError):
    code = "unauthenticated"


class ForbiddenError(APIError):
    code = "forbidden"


class NotFoundError(APIError):
    code = "not_found"


class MethodNotAllowedError(APIError):
    code = "method_not_allowed"


class ConflictError(APIError):
    code = "conflict"


class PayloadTooLargeError(APIError):
    code = "payload_too_large"


class QuotaExceededError(APIError):
    code = "quota_exceeded"


class RateLimitedError(APIError):
    code = "rate_limited"


class InternalError(APIError):
    code = "internal"


class BadGatewayError(APIError):
    code = "bad_gateway"


class RuntimeUnavailableError(APIError):
    code = "runtime_unavailable"


class NotReadyError(APIError):
    code = "not_ready"


ERRORS_BY_CODE = {c.code: c for c in (
    InvalidRequestError, UnauthenticatedError, ForbiddenError, NotFoundError,
    MethodNotAllowedError, ConflictError, PayloadTooLargeError, QuotaExceededError,
    RateLimitedError, InternalError, BadGatewayError, RuntimeUnavailableError, NotReadyError)}


def error_from_envelope(status: int, body: Any, retry_after: Optional[float] = None,
                        request_id: Optional[str] = None) -> APIError:
    """The exception for an HTTP error answer (an envelope, or anything else)."""
    e = body.get("error") if isinstance(body, dict) else None
    if not isinstance(e, dict):
        return APIError(status, "http_%d" % status, str(body)[:500] or "HTTP %d" % status,
                        request_id=request_id, retry_after=retry_after, body=body)
    code = str(e.get("code") or "http_%d" % status)
    cls = ERRORS_BY_CODE.get(code, APIError)
    return cls(status, code, str(e.get("message", "")), e.get("message_i18n"),
               e.get("request_id") or request_id, e.get("details"), retry_after, body)
