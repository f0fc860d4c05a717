// client.ts — the public API: Client and its resources (sandbox.execute and
// executions, sessions with exec / streams / processes / files / archives /
// watch / contexts, profiles, images, contracts, tools, usage, audit), each a
// thin, typed layer over one operation of ROUTES.

import { RequestTimeoutError, TransportError, errorFromBody } from "./errors.js";
import { CallOptions, ClientOptions, Transport } from "./http.js";
import type {
  ArchiveExtracted, AuditEvent, AuditPage, AuditVerdict, Context, ContextRunResult, ContractValidation,
  DirEntry, DirListing, ExecResult, Execution, ExecutionCreated, ExecutionList, FileStat, FileWritten,
  Image, InputFile, LimitsRequest, ManifestApplyResult, NetworkRequest, OutputChunk, Page, Process,
  ProcessOutput, ProfileList, Session, SessionList, StreamEvent, Tool, ToolInvoked, ToolList,
  ToolManifest, UsageReport, WatchEvent,
} from "./models.js";

const FINAL = new Set(["succeeded", "failed", "timeout", "oom_killed", "killed", "error"]);
const enc = new TextEncoder();

/** Bytes of a captured output (`stdout` with its `stdout_encoding`). */
export function decodeOutput(text: string | undefined, encoding?: string): Uint8Array {
  if (!text) return new Uint8Array();
  if (encoding !== "base64") return enc.encode(text);
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function toBase64(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(s);
}

function clean<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

export type FilesInput = InputFile[] | Record<string, string | Uint8Array>;

function inputFiles(f?: FilesInput): InputFile[] | undefined {
  if (!f) return undefined;
  if (Array.isArray(f)) return f;
  return Object.entries(f).map(([path, c]) => typeof c === "string"
    ? { path, content: c } : { path, content: toBase64(c), encoding: "base64" as const });
}

// ---- executions -----------------------------------------------------------------

export interface ExecutionRequest extends CallOptions {
  image?: string;
  profile?: string;
  command?: string[];
  language?: "python" | "node" | "bash" | "javascript";
  code?: string;
  /** Input files: a list of InputFile, or {path: text | bytes}. */
  files?: FilesInput;
  collect?: string[];
  stdin?: string;
  env?: Record<string, string>;
  limits?: LimitsRequest;
  network?: NetworkRequest;
  metadata?: Record<string, string>;
  /** Fields this SDK does not know yet, sent as given. */
  extra?: Record<string, unknown>;
}

export interface ExecuteOptions extends ExecutionRequest {
  /** Bound on the whole wait, in ms (default: the run's timeout_s + 6 min, else none). */
  waitTimeoutMs?: number;
}

function callOpts(o: CallOptions): CallOptions {
  return { signal: o.signal, timeoutMs: o.timeoutMs, traceparent: o.traceparent, requestId: o.requestId };
}

export class Executions {
  constructor(private readonly t: Transport) {}

  /** Queues an execution; answers at once.  Never retried except on a 429/503 refusal (nothing stored). */
  create(req: ExecutionRequest): Promise<ExecutionCreated> {
    const body = clean({
      profile: req.profile, image: req.image, command: req.command, language: req.language,
      code: req.code, files: inputFiles(req.files), collect: req.collect, stdin: req.stdin,
      env: req.env, limits: req.limits, network: req.network, metadata: req.metadata, ...req.extra,
    });
    return this.t.json("createExecution", { ...callOpts(req), json: body, expect: [202] });
  }

  /** The execution; with waitS (0–60) the daemon answers once it is final or after waitS seconds. */
  get(id: string, opts: CallOptions & { waitS?: number } = {}): Promise<Execution> {
    const timeoutMs = opts.timeoutMs ?? (opts.waitS ? this.t.timeoutMs + opts.waitS * 1000 : undefined);
    return this.t.json("getExecution", { ...callOpts(opts), timeoutMs, params: { id }, query: { wait_s: opts.waitS } });
  }

  /** Long-polls until final; timeoutMs bounds the whole wait (RequestTimeoutError past it). */
  async wait(id: string, opts: CallOptions & { timeoutMs?: number; pollS?: number } = {}): Promise<Execution> {
    const poll = opts.pollS ?? 30;
    const deadline = opts.timeoutMs === undefined ? undefined : Date.now() + opts.timeoutMs;
    for (;;) {
      const left = deadline === undefined ? poll : Math.max(0, Math.min(poll, (deadline - Date.now()) / 1000));
      const ex = await this.get(id, { ...callOpts(opts), timeoutMs: undefined, waitS: Math.round(Math.min(left, 60) * 10) / 10 });
      if (FINAL.has(ex.status)) return ex;
      if (deadline !== undefined && Date.now() >= deadline) {
        throw new RequestTimeoutError(`execution ${id} still ${ex.status} after ${opts.timeoutMs} ms`);
      }
    }
  }

  cancel(id: string, opts: CallOptions = {}): Promise<Execution> {
    return this.t.json("cancelExecution", { timeoutMs: this.t.timeoutMs + 5000, ...clean(callOpts(opts)), params: { id } });
  }

  async list(opts: CallOptions & { status?: string; limit?: number; cursor?: string } = {}): Promise<Page<Execution>> {
    const d = await this.t.json<ExecutionList>("listExecutions", { ...callOpts(opts),
      query: { status: opts.status, limit: opts.limit, cursor: opts.cursor } });
    return { items: d.executions, next_cursor: d.next_cursor };
  }

  /** Every execution of the tenant, newest first, following cursors. */
  async *iter(opts: CallOptions & { status?: string; pageSize?: number } = {}): AsyncGenerator<Execution> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.list({ ...opts, limit: opts.pageSize ?? 200, cursor });
      for (const x of page.items) yield x;
      if (!page.next_cursor) return;
      cursor = page.next_cursor;
    }
  }

  /** A collected file's bytes (path: one of files[].path). */
  download(id: string, path: string, opts: CallOptions = {}): Promise<Uint8Array> {
    return this.t.bytes("getExecutionFile", { ...callOpts(opts), params: { id }, query: { path }, accept: "*/*" });
  }
}

export class Sandbox {
  readonly executions: Executions;
  readonly sessions: Sessions;

  constructor(private readonly t: Transport) {
    this.executions = new Executions(t);
    this.sessions = new Sessions(t);
  }

  /** Creates an execution and waits for its final state (the seed's `sandbox.execute`). */
  async execute(req: ExecuteOptions): Promise<Execution> {
    const created = await this.executions.create(req);
    let wait = req.waitTimeoutMs;
    if (wait === undefined && req.limits?.timeout_s) wait = (Number(req.limits.timeout_s) + 360) * 1000;
    return this.executions.wait(created.id, { ...callOpts(req), timeoutMs: wait });
  }

  profiles(opts: CallOptions = {}): Promise<ProfileList> {
    return this.t.json("listProfiles", callOpts(opts));
  }
}

// ---- sessions -------------------------------------------------------------------

export interface SessionCreate extends CallOptions {
  profile?: string;
  image?: string;
  limits?: LimitsRequest;
  network?: NetworkRequest;
  env?: Record<string, string>;
  metadata?: Record<string, string>;
  ttl_s?: number;
  extra?: Record<string, unknown>;
}

export interface SessionPatch extends CallOptions {
  /** null resets the policy to {"egress":"none"}. */
  network?: NetworkRequest | null;
  ttl_s?: number;
  /** null clears the labels. */
  metadata?: Record<string, string> | null;
}

export interface ExecRequest extends CallOptions {
  command?: string[];
  language?: "python" | "node" | "bash";
  code?: string;
  stdin?: string;
  env?: Record<string, string>;
  cwd?: string;
  timeout_s?: number;
  extra?: Record<string, unknown>;
}

export interface StartRequest extends Omit<ExecRequest, "stdin"> {
  pty?: { cols?: number; rows?: number };
}

function execBody(r: ExecRequest, more: Record<string, unknown> = {}): Record<string, unknown> {
  return clean({ command: r.command, language: r.language, code: r.code, stdin: r.stdin, env: r.env,
    cwd: r.cwd, timeout_s: r.timeout_s, ...more, ...r.extra });
}

export class Sessions {
  constructor(private readonly t: Transport) {}

  async create(req: SessionCreate = {}): Promise<SandboxSession> {
    const body = clean({ profile: req.profile, image: req.image, limits: req.limits, network: req.network,
      env: req.env, metadata: req.metadata, ttl_s: req.ttl_s, ...req.extra });
    const s = await this.t.json<Session>("createSession", {
      timeoutMs: Math.max(this.t.timeoutMs, 120000), ...clean(callOpts(req)), json: body, expect: [201] });
    return new SandboxSession(this.t, s);
  }

  async get(id: string, opts: CallOptions = {}): Promise<SandboxSession> {
    return new SandboxSession(this.t, await this.t.json<Session>("getSession", { ...callOpts(opts), params: { id } }));
  }

  /** A handle on a session by id, without asking the daemon. */
  session(id: string): SandboxSession {
    return new SandboxSession(this.t, { id } as Session);
  }

  async list(opts: CallOptions & { status?: string; limit?: number; cursor?: string } = {}): Promise<Page<Session>> {
    const d = await this.t.json<SessionList>("listSessions", { ...callOpts(opts),
      query: { status: opts.status, limit: opts.limit, cursor: opts.cursor } });
    return { items: d.sessions, next_cursor: d.next_cursor };
  }

  async *iter(opts: CallOptions & { status?: string; pageSize?: number } = {}): AsyncGenerator<Session> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.list({ ...opts, limit: opts.pageSize ?? 200, cursor });
      for (const x of page.items) yield x;
      if (!page.next_cursor) return;
      cursor = page.next_cursor;
    }
  }

  /** PATCH: only the given fields change. */
  update(id: string, patch: SessionPatch): Promise<Session> {
    const body: Record<string, unknown> = {};
    if (patch.network !== undefined) body.network = patch.network;
    if (patch.metadata !== undefined) body.metadata = patch.metadata;
    if (patch.ttl_s !== undefined) body.ttl_s = patch.ttl_s;
    return this.t.json("updateSession", { ...callOpts(patch), params: { id }, json: body });
  }

  async delete(id: string, opts: CallOptions = {}): Promise<void> {
    await this.t.request("deleteSession", { ...callOpts(opts), params: { id }, expect: [204] });
  }
}

async function* streamEvents(it: AsyncGenerator<{ event: string; data: unknown }>): AsyncGenerator<StreamEvent> {
  for await (const { event, data } of it) {
    if (event === "stdout" || event === "stderr") {
      const c = data as OutputChunk;
      const bytes = c.data_base64 !== undefined ? decodeOutput(c.data_base64, "base64") : enc.encode(c.data ?? "");
      yield { event, data: c, bytes, text: new TextDecoder().decode(bytes) };
    } else if (event === "exit") {
      yield { event, data: data as ExecResult, result: data as ExecResult };
      return;
    } else if (event === "gap") {
      yield { event, data } as StreamEvent;
    }
  }
}

/** A live session: its last known state in `info`, and its operations. */
export class SandboxSession {
  readonly processes: Processes;
  readonly files: SessionFiles;
  readonly contexts: Contexts;

  constructor(private readonly t: Transport, public info: Session) {
    this.processes = new Processes(t, info.id);
    this.files = new SessionFiles(t, info.id);
    this.contexts = new Contexts(t, info.id);
  }

  get id(): string { return this.info.id; }
  get status(): string { return this.info.status; }

  async refresh(opts: CallOptions = {}): Promise<Session> {
    this.info = (await new Sessions(this.t).get(this.id, opts)).info;
    return this.info;
  }

  async update(patch: SessionPatch): Promise<Session> {
    this.info = await new Sessions(this.t).update(this.id, patch);
    return this.info;
  }

  delete(opts: CallOptions = {}): Promise<void> {
    return new Sessions(this.t).delete(this.id, opts);
  }

  private execTimeout(r: ExecRequest): number {
    return r.timeoutMs ?? Math.max(this.t.timeoutMs, ((r.timeout_s ?? 300) + 30) * 1000);
  }

  /** Runs a command and waits for its result (a non-zero exit or a timeout is a result, not an error). */
  exec(r: ExecRequest): Promise<ExecResult> {
    return this.t.json("execInSession", { ...callOpts(r), timeoutMs: this.execTimeout(r),
      params: { id: this.id }, json: execBody(r) });
  }

  /**
   * The same exec, streamed: `stdout` / `stderr` events as the output is read,
   * then `exit` with the result.  Leaving the loop early disconnects, which
   * kills the command.
   */
  stream(r: ExecRequest): AsyncGenerator<StreamEvent> {
    return streamEvents(this.t.events("execInSession", { ...callOpts(r), timeoutMs: r.timeoutMs,
      params: { id: this.id }, json: execBody(r) }));
  }

  /** Starts a background process (it outlives this connection). */
  async start(r: StartRequest): Promise<BackgroundProcess> {
    const d = await this.t.json<{ pid: number }>("execInSession", { ...callOpts(r), params: { id: this.id },
      json: execBody(r, { background: true, pty: r.pty }), expect: [202] });
    return new BackgroundProcess(this.processes, d.pid);
  }

  watch(path: string, opts: CallOptions & { recursive?: boolean } = {}): AsyncGenerator<WatchEvent> {
    return this.files.watch(path, opts);
  }
}

type OutputQuery = { offset?: number; stdoutOffset?: number; stderrOffset?: number };

export class Processes {
  constructor(private readonly t: Transport, private readonly sid: string) {}

  private p(pid: number) { return { id: this.sid, pid }; }

  private q(o: OutputQuery) {
    return { offset: o.offset, stdout_offset: o.stdoutOffset, stderr_offset: o.stderrOffset };
  }

  async list(opts: CallOptions = {}): Promise<Process[]> {
    return (await this.t.json<{ processes: Process[] }>("listProcesses", { ...callOpts(opts), params: { id: this.sid } })).processes;
  }

  get(pid: number, opts: CallOptions = {}): Promise<Process> {
    return this.t.json("getProcess", { ...callOpts(opts), params: this.p(pid) });
  }

  output(pid: number, opts: CallOptions & OutputQuery = {}): Promise<ProcessOutput> {
    return this.t.json("getProcessOutput", { ...callOpts(opts), params: this.p(pid), query: this.q(opts) });
  }

  /** Replays the kept output from the offsets, then follows it live; ends with `exit`. */
  follow(pid: number, opts: CallOptions & OutputQuery = {}): AsyncGenerator<StreamEvent> {
    return streamEvents(this.t.events("getProcessOutput", { ...callOpts(opts), params: this.p(pid), query: this.q(opts) }));
  }

  /** Appends data to the process's stdin; eof closes it after. */
  stdin(pid: number, data: string | Uint8Array, opts: CallOptions & { eof?: boolean } = {}): Promise<{ written: number; eof: boolean }> {
    return this.t.json("writeProcessStdin", { ...callOpts(opts), params: this.p(pid),
      query: { eof: opts.eof ? true : undefined }, body: typeof data === "string" ? enc.encode(data) : data });
  }

  /** Sends a signal by name (TERM, SIGINT, KILL, …) to the process group. */
  signal(pid: number, signal: string = "TERM", opts: CallOptions = {}): Promise<{ pid: number; signal: number }> {
    return this.t.json("signalProcess", { ...callOpts(opts), params: this.p(pid), json: { signal } });
  }

  async resize(pid: number, cols: number, rows: number, opts: CallOptions = {}): Promise<void> {
    await this.t.request("resizeProcessTerminal", { ...callOpts(opts), params: this.p(pid), json: { cols, rows } });
  }

  /** Follows the output until the process ends; its result. */
  async wait(pid: number, opts: CallOptions = {}): Promise<ExecResult> {
    for await (const ev of this.follow(pid, opts)) {
      if (ev.event === "exit") return ev.data as ExecResult;
    }
    throw new TransportError(`output stream of process ${pid} ended without exit`);
  }
}

export class BackgroundProcess {
  constructor(private readonly procs: Processes, readonly pid: number) {}
  get(opts?: CallOptions) { return this.procs.get(this.pid, opts); }
  output(opts?: CallOptions & OutputQuery) { return this.procs.output(this.pid, opts); }
  follow(opts?: CallOptions & OutputQuery) { return this.procs.follow(this.pid, opts); }
  stdin(data: string | Uint8Array, opts?: CallOptions & { eof?: boolean }) { return this.procs.stdin(this.pid, data, opts); }
  signal(signal?: string, opts?: CallOptions) { return this.procs.signal(this.pid, signal, opts); }
  resize(cols: number, rows: number, opts?: CallOptions) { return this.procs.resize(this.pid, cols, rows, opts); }
  wait(opts?: CallOptions) { return this.procs.wait(this.pid, opts); }
}

type ArchiveLimits = { maxEntries?: number; maxBytes?: number };

/** A session's files (paths absolute or relative to /work). */
export class SessionFiles {
  constructor(private readonly t: Transport, private readonly sid: string) {}

  private s() { return { id: this.sid }; }

  put(path: string, data: string | Uint8Array, opts: CallOptions = {}): Promise<FileWritten> {
    return this.t.json("writeSessionFile", { ...callOpts(opts), params: this.s(), query: { path },
      body: typeof data === "string" ? enc.encode(data) : data, expect: [201] });
  }

  get(path: string, opts: CallOptions = {}): Promise<Uint8Array> {
    return this.t.bytes("readSessionFile", { ...callOpts(opts), params: this.s(), query: { path }, accept: "*/*" });
  }

  async readText(path: string, opts: CallOptions = {}): Promise<string> {
    return new TextDecoder().decode(await this.get(path, opts));
  }

  async list(path = "/work", opts: CallOptions & { recursive?: boolean; maxDepth?: number } = {}): Promise<DirEntry[]> {
    const d = await this.t.json<DirListing>("readSessionFile", { ...callOpts(opts), params: this.s(),
      query: { path, list: true, recursive: opts.recursive ? true : undefined, max_depth: opts.maxDepth } });
    return d.entries;
  }

  stat(path: string, opts: CallOptions = {}): Promise<FileStat> {
    return this.t.json("readSessionFile", { ...callOpts(opts), params: this.s(), query: { path, stat: true } });
  }

  async delete(path: string, opts: CallOptions = {}): Promise<void> {
    await this.t.request("deleteSessionFile", { ...callOpts(opts), params: this.s(), query: { path }, expect: [204] });
  }

  mkdir(path: string, opts: CallOptions & { parents?: boolean; mode?: string } = {}): Promise<FileStat> {
    return this.t.json("makeSessionDirectory", { ...callOpts(opts), params: this.s(),
      query: { path, parents: opts.parents ? true : undefined, mode: opts.mode } });
  }

  move(from: string, to: string, opts: CallOptions & { overwrite?: boolean } = {}): Promise<FileStat> {
    return this.t.json("moveSessionFile", { ...callOpts(opts), params: this.s(),
      json: { from, to, overwrite: !!opts.overwrite } });
  }

  /** The tree under path as a tar. */
  archive(path: string, opts: CallOptions & ArchiveLimits = {}): Promise<Uint8Array> {
    return this.t.bytes("getSessionArchive", { ...callOpts(opts), params: this.s(), accept: "application/x-tar",
      query: { path, max_entries: opts.maxEntries, max_bytes: opts.maxBytes } });
  }

  /** Extracts a tar (optionally compressed) into the directory path. */
  extract(path: string, tar: Uint8Array, opts: CallOptions & ArchiveLimits = {}): Promise<ArchiveExtracted> {
    return this.t.json("putSessionArchive", { ...callOpts(opts), params: this.s(), body: tar,
      contentType: "application/x-tar", expect: [201],
      query: { path, max_entries: opts.maxEntries, max_bytes: opts.maxBytes } });
  }

  /** File events under a directory: `ready`, then create / modify / delete / move, `overflow`, `end`. */
  async *watch(path: string, opts: CallOptions & { recursive?: boolean } = {}): AsyncGenerator<WatchEvent> {
    for await (const { event, data } of this.t.events("watchSessionFiles", { ...callOpts(opts), params: this.s(),
      query: { path, recursive: opts.recursive ? true : undefined } })) {
      yield { event, data: (data ?? {}) as WatchEvent["data"] };
      if (event === "end") return;
    }
  }
}

/** Stateful interpreters (python, node) in a session. */
export class Contexts {
  constructor(private readonly t: Transport, private readonly sid: string) {}

  private c(cid: string) { return { id: this.sid, cid }; }

  async create(language: "python" | "node" = "python", opts: CallOptions = {}): Promise<ContextHandle> {
    const ctx = await this.t.json<Context>("createContext", { timeoutMs: Math.max(this.t.timeoutMs, 120000),
      ...clean(callOpts(opts)), params: { id: this.sid }, json: { language }, expect: [201] });
    return new ContextHandle(this, ctx);
  }

  async list(opts: CallOptions = {}): Promise<Context[]> {
    return (await this.t.json<{ contexts: Context[] }>("listContexts", { ...callOpts(opts), params: { id: this.sid } })).contexts;
  }

  get(cid: string, opts: CallOptions = {}): Promise<Context> {
    return this.t.json("getContext", { ...callOpts(opts), params: this.c(cid) });
  }

  run(cid: string, code: string, opts: CallOptions & { timeout_s?: number } = {}): Promise<ContextRunResult> {
    const timeoutMs = opts.timeoutMs ?? Math.max(this.t.timeoutMs, ((opts.timeout_s ?? 300) + 30) * 1000);
    return this.t.json("runInContext", { ...callOpts(opts), timeoutMs, params: this.c(cid),
      json: clean({ code, timeout_s: opts.timeout_s }) });
  }

  restart(cid: string, opts: CallOptions = {}): Promise<Context> {
    return this.t.json("restartContext", { timeoutMs: Math.max(this.t.timeoutMs, 120000), ...clean(callOpts(opts)),
      params: this.c(cid) });
  }

  async delete(cid: string, opts: CallOptions = {}): Promise<void> {
    await this.t.request("deleteContext", { ...callOpts(opts), params: this.c(cid), expect: [204] });
  }
}

export class ContextHandle {
  constructor(private readonly cs: Contexts, public info: Context) {}
  get id(): string { return this.info.id; }
  run(code: string, opts?: CallOptions & { timeout_s?: number }) { return this.cs.run(this.id, code, opts); }
  async restart(opts?: CallOptions) { this.info = await this.cs.restart(this.id, opts); return this.info; }
  async refresh(opts?: CallOptions) { this.info = await this.cs.get(this.id, opts); return this.info; }
  delete(opts?: CallOptions) { return this.cs.delete(this.id, opts); }
}

// ---- contracts and tools -------------------------------------------------------------

/** Named JSON Schema contracts (today `tool-manifest`) and validation against them; nothing is stored. */
export class Contracts {
  constructor(private readonly t: Transport) {}

  /** The contract names. */
  async list(opts: CallOptions = {}): Promise<string[]> {
    return (await this.t.json<{ contracts: string[] }>("listContracts", callOpts(opts))).contracts;
  }

  /** The contract's JSON Schema (draft-07), as served (application/schema+json). */
  get(name: string, opts: CallOptions = {}): Promise<Record<string, unknown>> {
    return this.t.json("getContract", { ...callOpts(opts), params: { name },
      accept: "application/schema+json, application/json" });
  }

  /**
   * Every violation of `document` (any JSON value) against the contract, each
   * with the JSON pointer of the value at fault.  A bad document is a result
   * (`valid` false), not an error.
   */
  validate(name: string, document: unknown, opts: CallOptions = {}): Promise<ContractValidation> {
    return this.t.json("validateContract", { ...callOpts(opts), params: { name }, json: document ?? null });
  }
}

export interface ApplyOptions extends CallOptions {
  /** Check and report the actions, store nothing. */
  dryRun?: boolean;
}

export interface ToolInvokeOptions extends CallOptions {
  /** Labels of the execution (the daemon adds `tool` and `tool_generation`). */
  metadata?: Record<string, string>;
}

export interface ToolRunOptions extends ToolInvokeOptions {
  /** Bound on the whole wait for the final state, in ms (default: none). */
  waitTimeoutMs?: number;
}

/** Tools applied from tool manifests and run as executions in their `spec.sandbox_profile`. */
export class Tools {
  constructor(private readonly t: Transport) {}

  /**
   * Creates or updates tools: one manifest, or a list of 1 to 64 applied all
   * or nothing.  Idempotent per name: each result's `action` is created,
   * updated or unchanged.  A bad document throws InvalidRequestError whose
   * `violations` list every violation (`index` the document, `path` in it).
   */
  apply(manifests: ToolManifest | ToolManifest[], opts: ApplyOptions = {}): Promise<ManifestApplyResult> {
    return this.t.json("applyManifests", { ...callOpts(opts), query: { dry_run: opts.dryRun ? true : undefined },
      json: Array.isArray(manifests) ? { items: manifests } : manifests });
  }

  /** A page of the tenant's tools, in name order. */
  async list(opts: CallOptions & { limit?: number; cursor?: string } = {}): Promise<Page<Tool>> {
    const d = await this.t.json<ToolList>("listTools", { ...callOpts(opts),
      query: { limit: opts.limit, cursor: opts.cursor } });
    return { items: d.tools, next_cursor: d.next_cursor };
  }

  /** Every tool of the tenant, in name order, following cursors. */
  async *iter(opts: CallOptions & { pageSize?: number } = {}): AsyncGenerator<Tool> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.list({ ...opts, limit: opts.pageSize ?? 200, cursor });
      for (const x of page.items) yield x;
      if (!page.next_cursor) return;
      cursor = page.next_cursor;
    }
  }

  /** The tool with its manifest (NotFoundError when there is none). */
  get(name: string, opts: CallOptions = {}): Promise<Tool> {
    return this.t.json("getTool", { ...callOpts(opts), params: { name } });
  }

  /** Deletes the tool; executions it started run on. */
  async delete(name: string, opts: CallOptions = {}): Promise<void> {
    await this.t.request("deleteTool", { ...callOpts(opts), params: { name }, expect: [204] });
  }

  /**
   * Queues an execution of the tool with this input (any JSON value its
   * input_schema accepts; undefined sends none: the daemon's default, {}),
   * which the program reads as JSON on its stdin.  An input the schema refuses
   * throws InvalidRequestError whose `violations` have paths under /input.
   */
  invoke(name: string, input?: unknown, opts: ToolInvokeOptions = {}): Promise<ToolInvoked> {
    return this.t.json("invokeTool", { ...callOpts(opts), params: { name },
      json: clean({ input, metadata: opts.metadata }), expect: [202] });
  }

  /** invoke, then long-polls (as sandbox.execute does) until the execution is final; returns it. */
  async run(name: string, input?: unknown, opts: ToolRunOptions = {}): Promise<Execution> {
    const invoked = await this.invoke(name, input, opts);
    return new Executions(this.t).wait(invoked.id, { ...callOpts(opts), timeoutMs: opts.waitTimeoutMs });
  }
}

// ---- images, usage, audit -----------------------------------------------------------

export class Images {
  constructor(private readonly t: Transport) {}

  async list(opts: CallOptions = {}): Promise<Image[]> {
    return (await this.t.json<{ images: Image[] }>("listImages", callOpts(opts))).images;
  }

  /** Pulls an image (admin key); {ref, digest} once stored; onProgress gets each {blob, done, total}. */
  async pull(ref: string, opts: CallOptions & { onProgress?: (p: { blob: string; done: number; total: number }) => void } = {}): Promise<{ ref: string; digest: string }> {
    const timeoutMs = opts.timeoutMs ?? 1800000;
    if (!opts.onProgress) return this.t.json("pullImage", { ...callOpts(opts), timeoutMs, json: { ref } });
    for await (const { event, data } of this.t.events("pullImage", { ...callOpts(opts), timeoutMs, json: { ref } })) {
      if (event === "progress") opts.onProgress(data as { blob: string; done: number; total: number });
      else if (event === "done" || event === "json") return data as { ref: string; digest: string };
      else if (event === "error") {
        const e = data as { code?: string };
        throw errorFromBody(e.code === "bad_gateway" ? 502 : 500, { error: data });
      }
    }
    throw new TransportError(`pull of ${ref}: stream ended without done or error`);
  }

  async delete(ref: string, opts: CallOptions = {}): Promise<void> {
    await this.t.request("deleteImage", { ...callOpts(opts), params: { "ref*": ref }, expect: [204] });
  }

  gc(opts: CallOptions = {}): Promise<Record<string, number>> {
    return this.t.json("collectImageGarbage", callOpts(opts));
  }
}

export class Audit {
  constructor(private readonly t: Transport) {}

  async list(opts: CallOptions & { tenant?: number; action?: string; after?: number; limit?: number } = {}): Promise<{ items: AuditEvent[]; next_cursor: number | null }> {
    const d = await this.t.json<AuditPage>("listAuditEvents", { ...callOpts(opts),
      query: { tenant: opts.tenant, action: opts.action, after: opts.after, limit: opts.limit } });
    return { items: d.events, next_cursor: d.next_cursor };
  }

  async *iter(opts: CallOptions & { tenant?: number; action?: string; after?: number } = {}): AsyncGenerator<AuditEvent> {
    let after = opts.after;
    for (;;) {
      const page = await this.list({ ...opts, after, limit: 1000 });
      for (const x of page.items) yield x;
      if (page.next_cursor === null) return;
      after = page.next_cursor;
    }
  }

  verify(opts: CallOptions = {}): Promise<AuditVerdict> {
    return this.t.json("verifyAudit", { timeoutMs: Math.max(this.t.timeoutMs, 300000), ...clean(callOpts(opts)) });
  }
}

/**
 * sandboxd client.  baseUrl / apiKey default to SANDBOXD_URL / SANDBOXD_API_KEY
 * (Node), then http://127.0.0.1:8080.
 */
export class Client {
  readonly sandbox: Sandbox;
  readonly images: Images;
  readonly contracts: Contracts;
  readonly tools: Tools;
  readonly audit: Audit;
  private readonly t: Transport;

  constructor(options: ClientOptions = {}) {
    this.t = new Transport(options);
    this.sandbox = new Sandbox(this.t);
    this.images = new Images(this.t);
    this.contracts = new Contracts(this.t);
    this.tools = new Tools(this.t);
    this.audit = new Audit(this.t);
  }

  get baseUrl(): string { return this.t.baseUrl; }

  /** A copy with some options changed ({language: "fr"}, {timeoutMs: 5000}, …). */
  withOptions(o: ClientOptions): Client {
    return new Client({ ...this.t.opts, baseUrl: this.t.baseUrl, apiKey: this.t.apiKey, ...o });
  }

  healthz(opts: CallOptions = {}): Promise<{ status: string }> {
    return this.t.json("healthz", callOpts(opts));
  }

  /** The readiness report (a 503 "not ready" report is returned, not thrown). */
  async readyz(opts: CallOptions = {}): Promise<{ status: string; checks: Record<string, unknown> }> {
    try {
      return await this.t.json("readyz", { ...callOpts(opts) });
    } catch (e) {
      const body = (e as { status?: number; body?: unknown }).body;
      if ((e as { status?: number }).status === 503 && body && typeof body === "object" && "checks" in body) {
        return body as { status: string; checks: Record<string, unknown> };
      }
      throw e;
    }
  }

  profiles(opts: CallOptions = {}): Promise<ProfileList> {
    return this.sandbox.profiles(opts);
  }

  usage(opts: CallOptions & { groupBy?: "profile" | "project" | "agent"; from?: string | number; to?: string | number } = {}): Promise<UsageReport> {
    return this.t.json("getUsage", { ...callOpts(opts), query: { group_by: opts.groupBy, from: opts.from, to: opts.to } });
  }
}
