// errors.ts — the SDK's errors: one class per error-envelope code of the API
// ({"error": {code, message, message_i18n, request_id, details}}), plus the
// transport's own (timeouts, connection failures).

import type { Violation } from "./models.js";

export interface ErrorDetails {
  field?: string;
  limit?: string;
  value?: number;
  /** Every JSON Schema violation of a manifest apply or a tool's input. */
  violations?: Violation[];
  [k: string]: unknown;
}

export interface ErrorEnvelope {
  code: string;
  message: string;
  message_i18n: { en: string; fr: string };
  request_id: string;
  details: ErrorDetails;
}

/** Base of every error this SDK throws. */
export class SandboxdError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message);
    this.name = new.target.name;
    if (options && "cause" in options) (this as { cause?: unknown }).cause = options.cause;
  }
}

/** The daemon could not be reached, or the connection broke. */
export class TransportError extends SandboxdError {}

/** The client-side timeout ran out (or the caller's AbortSignal fired). */
export class RequestTimeoutError extends TransportError {}

/** The caller's AbortSignal aborted the request. */
export class AbortedError extends TransportError {}

/** An error envelope from the daemon. */
export class APIError extends SandboxdError {
  static readonly code: string = "api_error";
  readonly status: number;
  readonly code: string;
  readonly messageI18n: { en?: string; fr?: string };
  readonly requestId: string | undefined;
  readonly details: ErrorDetails;
  readonly retryAfter: number | undefined;
  readonly body: unknown;

  constructor(status: number, env: Partial<ErrorEnvelope>, retryAfter?: number,
              requestId?: string, body?: unknown) {
    const rid = env.request_id ?? requestId;
    super(env.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = env.code ?? `http_${status}`;
    this.messageI18n = env.message_i18n ?? {};
    this.requestId = rid;
    this.details = env.details ?? {};
    this.retryAfter = retryAfter;
    this.body = body;
  }

  /** `details.field` of a validation error. */
  get field(): string | undefined {
    return typeof this.details.field === "string" ? this.details.field : undefined;
  }

  /**
   * `details.violations`: every JSON Schema violation of a manifest apply or
   * of a tool's input (`path`, `message`, `index` of the document in an
   * apply); [] for other errors.
   */
  get violations(): Violation[] {
    const v = this.details.violations;
    return Array.isArray(v) ? v.filter((x) => x !== null && typeof x === "object") : [];
  }

  override toString(): string {
    return `${this.name}: ${this.status} ${this.code}: ${this.message}` +
      (this.requestId ? ` (request ${this.requestId})` : "");
  }
}

export class InvalidRequestError extends APIError { static override readonly code = "invalid_request"; }
export class UnauthenticatedError extends APIError { static override readonly code = "unauthenticated"; }
export class ForbiddenError extends APIError { static override readonly code = "forbidden"; }
export class NotFoundError extends APIError { static override readonly code = "not_found"; }
export class MethodNotAllowedError extends APIError { static override readonly code = "method_not_allowed"; }
export class ConflictError extends APIError { static override readonly code = "conflict"; }
export class PayloadTooLargeError extends APIError { static override readonly code = "payload_too_large"; }
export class QuotaExceededError extends APIError { static override readonly code = "quota_exceeded"; }
export class RateLimitedError extends APIError { static override readonly code = "rate_limited"; }
export class InternalError extends APIError { static override readonly code = "internal"; }
export class BadGatewayError extends APIError { static override readonly code = "bad_gateway"; }
export class RuntimeUnavailableError extends APIError { static override readonly code = "runtime_unavailable"; }
export class NotReadyError extends APIError { static override readonly code = "not_ready"; }

export const ERRORS_BY_CODE: { readonly [code: string]: typeof APIError } = Object.fromEntries(
  [InvalidRequestError, UnauthenticatedError, ForbiddenError, NotFoundError, MethodNotAllowedError,
    ConflictError, PayloadTooLargeError, QuotaExceededError, RateLimitedError, InternalError,
    BadGatewayError, RuntimeUnavailableError, NotReadyError].map((c) => [c.code, c]));

/** The error for an HTTP error answer (an envelope, or anything else). */
export function errorFromBody(status: number, body: unknown, retryAfter?: number,
                              requestId?: string): APIError {
  const e = (body && typeof body === "object" && "error" in body)
    ? (body as { error: unknown }).error : undefined;
  if (!e || typeof e !== "object") {
    const text = typeof body === "string" ? body.slice(0, 500) : "";
    return new APIError(status, { message: text || `HTTP ${status}` }, retryAfter, requestId, body);
  }
  const env = e as Partial<ErrorEnvelope>;
  const Cls = (env.code && ERRORS_BY_CODE[env.code]) || APIError;
  return new Cls(status, env, retryAfter, requestId, body);
}
