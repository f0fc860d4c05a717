// http.ts — the transport: one fetch per call, the API key, Accept-Language,
// traceparent and X-Request-Id headers, JSON in and out, error envelopes
// turned into errors, bounded retries with exponential backoff and jitter on
// 429/503 (honouring Retry-After), timeouts through AbortSignal, and
// Server-Sent Events read as an async iterator.

import { APIError, AbortedError, RequestTimeoutError, TransportError, errorFromBody } from "./errors.js";
import { Operation, ROUTES } from "./routes.js";

export const VERSION = "0.1.0";
export const DEFAULT_URL = "http://127.0.0.1:8080";
const IDEMPOTENT = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);

export type TraceparentSource = string | (() => string | undefined | null) | undefined | null;

export interface RetryInfo {
  operation: string;
  attempt: number;
  delayMs: number;
  why: string;
  retryAfter?: number;
  requestId?: string;
}

export interface ClientOptions {
  /** Default: SANDBOXD_URL (Node), else http://127.0.0.1:8080. */
  baseUrl?: string;
  /** Default: SANDBOXD_API_KEY (Node). */
  apiKey?: string;
  /** Accept-Language of error messages: "fr" or "en". */
  language?: string;
  /** Per-request timeout in ms (default 60000); long calls stretch it to their own bound. */
  timeoutMs?: number;
  /** Retries of 429/503 refusals and connection failures (default 4). */
  maxRetries?: number;
  /** First backoff step in ms (default 250), doubled per attempt up to maxBackoffMs (8000). */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Longest Retry-After honoured, in seconds (default 60). */
  maxRetryAfterS?: number;
  /** A W3C traceparent, or a function returning the caller's current one. */
  traceparent?: TraceparentSource;
  /** Called before each retry's sleep. */
  onRetry?: (info: RetryInfo) => void;
  /** A fetch implementation (default globalThis.fetch). */
  fetch?: typeof fetch;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
}

export interface CallOptions {
  /** Aborts the request (and closes a stream). */
  signal?: AbortSignal;
  /** This call's timeout in ms (streams: none unless given). */
  timeoutMs?: number;
  /** This call's traceparent, over the client's. */
  traceparent?: string;
  /** This call's X-Request-Id (1–39 of [A-Za-z0-9_-]). */
  requestId?: string;
}

export interface RequestSpec extends CallOptions {
  params?: Record<string, string | number>;
  query?: Record<string, string | number | boolean | undefined | null>;
  json?: unknown;
  body?: Uint8Array | string;
  contentType?: string;
  accept?: string;
  stream?: boolean;
  expect?: number[];
}

function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env?.[name] || undefined;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new AbortedError("aborted"));
    const t = setTimeout(() => { signal?.removeEventListener("abort", onAbort); resolve(); }, ms);
    const onAbort = () => { clearTimeout(t); reject(new AbortedError("aborted")); };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function retryAfter(h: Headers): number | undefined {
  const v = h.get("Retry-After");
  if (v === null) return undefined;
  const n = Number(v);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

/**
 * 429 and 503 are answered before the daemon stores or runs anything
 * ("nothing is stored for a refused request"), so retrying them cannot
 * duplicate a creation.  Of the 429s, only those that waiting cures are
 * retried: the rate limit and the full execution queue; a tenant quota
 * (details.limit sessions / executions / cpu_seconds_per_day) is not.
 */
export function shouldRetry(status: number, body: unknown): boolean {
  if (status !== 429 && status !== 503) return false;
  const e = body && typeof body === "object" ? (body as { error?: unknown }).error : undefined;
  if (!e || typeof e !== "object") return status === 503;
  const { code, details } = e as { code?: string; details?: { limit?: string } };
  if (status === 503) return code === "runtime_unavailable" || code === "not_ready";
  if (code === "rate_limited") return true;
  return code === "quota_exceeded" && !details?.limit;
}

/** A connection refused before the request went out: safe to retry any method. */
function refusedBeforeSending(err: unknown): boolean {
  const c = (err as { cause?: { code?: string } })?.cause?.code;
  return c === "ECONNREFUSED" || c === "ENOTFOUND" || c === "EAI_AGAIN";
}

export class Transport {
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  readonly opts: Required<Pick<ClientOptions, "timeoutMs" | "maxRetries" | "backoffMs" |
    "maxBackoffMs" | "maxRetryAfterS">> & ClientOptions;
  private readonly fetchImpl: typeof fetch;

  constructor(o: ClientOptions = {}) {
    this.baseUrl = (o.baseUrl ?? env("SANDBOXD_URL") ?? DEFAULT_URL).replace(/\/+$/, "");
    if (!/^https?:\/\/[^/]+/.test(this.baseUrl)) {
      throw new TypeError(`baseUrl must be http(s)://host[:port]: ${this.baseUrl}`);
    }
    this.apiKey = o.apiKey ?? env("SANDBOXD_API_KEY");
    this.opts = { timeoutMs: 60000, maxRetries: 4, backoffMs: 250, maxBackoffMs: 8000,
      maxRetryAfterS: 60, ...o };
    const f = o.fetch ?? globalThis.fetch;
    if (!f) throw new TypeError("no fetch: Node ≥ 18, a browser, or pass options.fetch");
    this.fetchImpl = f.bind(globalThis);
  }

  get timeoutMs(): number { return this.opts.timeoutMs; }

  private traceparent(call?: string): string | undefined {
    if (call) return call;
    const src = this.opts.traceparent;
    if (typeof src === "function") return src() ?? undefined;
    if (src) return src;
    return env("TRACEPARENT"); // inside a sandbox: the daemon's own context
  }

  url(op: Operation, params: Record<string, string | number> = {},
      query?: RequestSpec["query"]): string {
    let p: string = ROUTES[op][1];
    for (const [k, v] of Object.entries(params)) {
      const enc = k.endsWith("*")
        ? String(v).split("/").map(encodeURIComponent).join("/").replace(/%3A/gi, ":").replace(/%40/g, "@")
        : encodeURIComponent(String(v));
      p = p.replace(`{${k}}`, enc);
    }
    if (p.includes("{")) throw new TypeError(`${op}: missing path parameter in ${p}`);
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v === undefined || v === null) continue;
      q.append(k, typeof v === "boolean" ? (v ? "true" : "false") : String(v));
    }
    const qs = q.toString();
    return this.baseUrl + p + (qs ? `?${qs}` : "");
  }

  headers(spec: RequestSpec): Record<string, string> {
    const h: Record<string, string> = { Accept: spec.accept ?? "application/json", ...this.opts.headers };
    // Browsers refuse to set User-Agent; Node accepts it.
    if (typeof (globalThis as { window?: unknown }).window === "undefined") {
      h["User-Agent"] = `sandboxd-js/${VERSION}`;
    }
    if (this.apiKey) h.Authorization = `Bearer ${this.apiKey}`;
    if (this.opts.language) h["Accept-Language"] = this.opts.language;
    const tp = this.traceparent(spec.traceparent);
    if (tp) h.traceparent = tp;
    if (spec.requestId) h["X-Request-Id"] = spec.requestId;
    if (spec.stream) h.Accept = "text/event-stream";
    return h;
  }

  private delay(attempt: number, ra?: number): number {
    if (ra !== undefined) return Math.min(ra, this.opts.maxRetryAfterS) * 1000 + Math.random() * 100;
    const cap = Math.min(this.opts.maxBackoffMs, this.opts.backoffMs * 2 ** attempt);
    return cap / 2 + Math.random() * (cap / 2); // equal jitter
  }

  private async backoff(op: string, attempt: number, why: string, signal: AbortSignal | undefined,
                        ra?: number, requestId?: string): Promise<number> {
    const d = this.delay(attempt, ra);
    this.opts.onRetry?.({ operation: op, attempt: attempt + 1, delayMs: d, why, retryAfter: ra, requestId });
    await sleep(d, signal);
    return attempt + 1;
  }

  /** Sends a request; returns the Response (status < 400) or throws. */
  async request(op: Operation, spec: RequestSpec = {}): Promise<Response> {
    const method = ROUTES[op][0];
    const url = this.url(op, spec.params, spec.query);
    const headers = this.headers(spec);
    let body: BodyInit | undefined;
    if (spec.json !== undefined) {
      body = JSON.stringify(spec.json);
      headers["Content-Type"] = "application/json";
    } else if (spec.body !== undefined) {
      body = spec.body as BodyInit;
      headers["Content-Type"] = spec.contentType ?? "application/octet-stream";
    }
    const timeoutMs = spec.timeoutMs ?? (spec.stream ? undefined : this.opts.timeoutMs);
    let attempt = 0;
    for (;;) {
      const ctl = new AbortController();
      let timedOut = false;
      const timer = timeoutMs === undefined ? undefined
        : setTimeout(() => { timedOut = true; state.timedOut = true; ctl.abort(); }, timeoutMs);
      const state = { timedOut: false, aborted: false };
      const onAbort = () => { state.aborted = true; ctl.abort(); };
      if (spec.signal?.aborted) throw new AbortedError(`${method} ${url}: aborted`);
      spec.signal?.addEventListener("abort", onAbort, { once: true });
      const done = () => { if (timer) clearTimeout(timer); spec.signal?.removeEventListener("abort", onAbort); };
      let resp: Response;
      try {
        resp = await this.fetchImpl(url, { method, headers, body, signal: ctl.signal });
      } catch (err) {
        done();
        if (spec.signal?.aborted) throw new AbortedError(`${method} ${url}: aborted`, { cause: err });
        const safe = refusedBeforeSending(err) || IDEMPOTENT.has(method);
        if (safe && attempt < this.opts.maxRetries) {
          attempt = await this.backoff(op, attempt, timedOut ? "timeout" : `transport: ${err}`, spec.signal);
          continue;
        }
        if (timedOut) throw new RequestTimeoutError(`${method} ${url}: no answer within ${timeoutMs} ms`, { cause: err });
        throw new TransportError(`${method} ${url}: ${(err as Error)?.message ?? err}`, { cause: err });
      }
      const ctype = resp.headers.get("Content-Type") ?? "";
      if (resp.status < 400 && (!spec.expect || spec.expect.includes(resp.status))) {
        if (spec.stream) {
          // The stream keeps the timer (a total bound when the caller set one) and the signal.
          return withCleanup(resp, done, state);
        }
        // Buffer the body inside the timeout, so a stalled body is a timeout too.
        try {
          const buf = new Uint8Array(await resp.arrayBuffer());
          done();
          return new Response(resp.status === 204 ? null : buf, { status: resp.status, headers: resp.headers });
        } catch (err) {
          done();
          if (timedOut) throw new RequestTimeoutError(`${method} ${url}: answer cut by the timeout`, { cause: err });
          if (spec.signal?.aborted) throw new AbortedError(`${method} ${url}: aborted`, { cause: err });
          throw new TransportError(`${method} ${url}: ${(err as Error)?.message ?? err}`, { cause: err });
        }
      }
      let parsed: unknown;
      try {
        const text = await resp.text();
        parsed = ctype.startsWith("application/json") && text ? JSON.parse(text) : text;
      } catch {
        parsed = undefined;
      } finally {
        done();
      }
      const ra = retryAfter(resp.headers);
      const rid = resp.headers.get("X-Request-Id") ?? undefined;
      if (shouldRetry(resp.status, parsed) && attempt < this.opts.maxRetries) {
        attempt = await this.backoff(op, attempt, `HTTP ${resp.status}`, spec.signal, ra, rid);
        continue;
      }
      throw errorFromBody(resp.status, parsed, ra, rid);
    }
  }

  async json<T>(op: Operation, spec: RequestSpec = {}): Promise<T> {
    const r = await this.request(op, spec);
    const text = await r.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  async bytes(op: Operation, spec: RequestSpec = {}): Promise<Uint8Array> {
    const r = await this.request(op, spec);
    return new Uint8Array(await r.arrayBuffer());
  }

  /** An SSE answer as (event, data) pairs; data parsed as JSON. */
  async *events(op: Operation, spec: RequestSpec): AsyncGenerator<{ event: string; data: unknown }> {
    const resp = await this.request(op, { ...spec, stream: true });
    if (!(resp.headers.get("Content-Type") ?? "").startsWith("text/event-stream")) {
      // A route that answered in JSON instead (e.g. a pull already done).
      const text = await resp.text();
      yield { event: "json", data: text ? JSON.parse(text) : undefined };
      return;
    }
    yield* parseSSE(resp);
  }
}

const CLEANUP = Symbol("sandboxd.cleanup");
type StreamState = { timedOut: boolean; aborted: boolean };
type Tracked = Response & { [CLEANUP]?: { done: () => void; state: StreamState } };

function withCleanup(resp: Response, done: () => void, state: StreamState): Response {
  (resp as Tracked)[CLEANUP] = { done, state };
  return resp;
}

/** Parses an SSE body (a Response) into (event, data) pairs. */
export async function* parseSSE(resp: Response): AsyncGenerator<{ event: string; data: unknown }> {
  const tracked = (resp as Tracked)[CLEANUP];
  const cleanup = tracked?.done;
  if (!resp.body) { cleanup?.(); return; }
  const reader = resp.body.getReader();
  const dec = new TextDecoder("utf-8");
  let buf = "";
  let event: string | undefined;
  let data: string[] = [];
  try {
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (err) {
        if (tracked?.state.timedOut) throw new RequestTimeoutError("stream cut by its timeout", { cause: err });
        if (tracked?.state.aborted) throw new AbortedError("stream aborted", { cause: err });
        throw new TransportError(`stream broken: ${(err as Error)?.message ?? err}`, { cause: err });
      }
      if (chunk.done) return;
      buf += dec.decode(chunk.value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        let line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.endsWith("\r")) line = line.slice(0, -1);
        if (line === "") {
          if (event !== undefined || data.length) {
            const payload = data.join("\n");
            yield { event: event ?? "message", data: payload ? JSON.parse(payload) : undefined };
          }
          event = undefined;
          data = [];
        } else if (line.startsWith(":")) {
          continue; // keep-alive comment
        } else if (line.startsWith("event:")) {
          event = line.slice(6).trimStart();
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
        }
      }
    }
  } finally {
    // Leaving the loop early (break, return, throw) drops the connection.
    try { await reader.cancel(); } catch { /* already closed */ }
    cleanup?.();
  }
}

export { APIError };
