// models.ts — the API's JSON objects as TypeScript types (the schemas of
// docs/api/openapi.yaml of the same name; tests/sdk/check_sdk_contract.py
// checks every field named here against them).  Objects are the JSON as
// the daemon sent it: snake_case, nothing renamed.

export type ExecStatus = "queued" | "running" | "succeeded" | "failed" | "timeout" |
  "oom_killed" | "killed" | "error";
export type OutputEncoding = "utf-8" | "base64";
export type Capability = "exec" | "files" | "terminal" | "watch" | "upstream" | "archive" |
  "contexts" | "egress_allowlist" | "images";

export interface Limits {
  cpu: string;
  memory: string;
  disk: string;
  pids: number;
  timeout_s: number;
  output_bytes: number;
}

/** Limits asked for: any subset; quantities as strings or numbers. */
export interface LimitsRequest {
  cpu?: string | number;
  memory?: string | number;
  disk?: string | number;
  pids?: number;
  timeout_s?: number;
  output_bytes?: string | number;
}

export interface NetworkRequest {
  egress?: "none" | "allowlist";
  allow?: string[];
}

export interface Network {
  egress: "none" | "allowlist";
  allow?: string[];
}

export interface Profile {
  name: string;
  driver: string;
  class: string;
  image: string;
  available: boolean;
  state: "probing" | "available" | "unavailable";
  capabilities: Capability[];
  limits: Limits;
  max_limits: Limits;
  default_timeout_s: number;
  pool_size: number;
  default: boolean;
  reason: string | null;
  platform?: string;
  platform_note?: string;
  /** Dedicated-kernel profiles (microvm, kata): the accelerator, kvm or tcg. */
  accel?: "kvm" | "tcg";
}

export interface ProfileList {
  profiles: Profile[];
  default: string;
}

export interface Session {
  id: string;
  status: "ready" | "terminated" | "expired" | "failed" | "lost";
  reason: string | null;
  profile: string;
  runtime: string;
  image: string;
  limits: Limits;
  network: Network;
  capabilities: Capability[];
  created_at: string;
  expires_at: string;
  updated_at: string;
  metadata: Record<string, string>;
  ttl_s: number;
}

export interface SessionList {
  sessions: Session[];
  next_cursor: string | null;
}

export interface ResultError {
  reason: string;
  message: string;
}

export interface ExecUsage {
  cpu_seconds: number;
  memory_peak_bytes: number;
  /** OOM kills in the sandbox's cgroup while the exec ran. */
  oom_kills: number;
}

export interface ExecResult {
  status: ExecStatus;
  reason: string;
  exit_code: number | null;
  signal: number | null;
  stdout: string;
  stdout_encoding: OutputEncoding;
  stderr: string;
  stderr_encoding: OutputEncoding;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  stdout_dropped_bytes: number;
  stderr_dropped_bytes: number;
  duration_ms: number;
  usage: ExecUsage;
  error: ResultError | null;
}

export interface FileInfo {
  path: string;
  size: number;
  sha256: string;
}

export interface ExecutionUsage {
  cpu_seconds: number;
  memory_mb_seconds: number;
  duration_seconds: number;
  memory_peak_bytes: number;
}

export interface ExecutionCreated {
  id: string;
  status: "queued";
  profile: string;
}

export interface Execution {
  id: string;
  status: ExecStatus;
  reason: string | null;
  profile: string;
  exit_code: number | null;
  signal: number | null;
  /** Present when one execution is fetched, absent in list items. */
  stdout?: string;
  stdout_encoding?: OutputEncoding;
  stderr?: string;
  stderr_encoding?: OutputEncoding;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  stdout_dropped_bytes: number;
  stderr_dropped_bytes: number;
  files: FileInfo[];
  usage: ExecutionUsage;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  error: ResultError | null;
  metadata: Record<string, string>;
}

export interface ExecutionList {
  executions: Execution[];
  next_cursor: string | null;
}

/** An input file: text, or base64 with encoding "base64". */
export interface InputFile {
  path: string;
  content: string;
  encoding?: "utf-8" | "base64";
}

export interface FileWritten {
  path: string;
  size: number;
}

export interface DirEntry {
  name: string;
  path: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  mode: string;
  mtime: number;
}

export interface DirListing {
  entries: DirEntry[];
}

export interface FileStat {
  name: string;
  path: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  mode: string;
  mtime: number;
  link_target?: string;
}

export interface ArchiveExtracted {
  path: string;
  entries: number;
  bytes: number;
}

export interface Process {
  pid: number;
  command: string[];
  status: "running" | "exited";
  exit_code: number | null;
  signal: number | null;
  started_at: string | null;
  finished_at: string | null;
  pty: false | { cols?: number; rows?: number };
  result_status?: string | null;
  reason?: string | null;
  usage?: ExecUsage | null;
  stdout_bytes?: number;
  stderr_bytes?: number;
}

/** The kept output of a background process (ProcessOutput describes these keys in prose). */
export interface ProcessOutput {
  stdout: string;
  stdout_encoding: OutputEncoding;
  stdout_offset: number;
  stdout_next_offset: number;
  stdout_dropped_bytes: number;
  stdout_skipped: boolean;
  stdout_gap_at: number | null;
  stderr: string;
  stderr_encoding: OutputEncoding;
  stderr_offset: number;
  stderr_next_offset: number;
  stderr_dropped_bytes: number;
  stderr_skipped: boolean;
  stderr_gap_at: number | null;
  status: string;
  result: ExecResult | null;
}

export interface Context {
  id: string;
  language: "python" | "node";
  status: "starting" | "ready" | "busy" | "dead";
  session_id: string;
  execution_count: number;
  version: string;
  error: string | null;
  created_at: string;
}

export interface ContextRunResult {
  status: "succeeded" | "failed" | "timeout" | "killed" | "error";
  reason: string;
  stdout: string;
  stdout_encoding: OutputEncoding;
  stderr: string;
  stderr_encoding: OutputEncoding;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  result: string | null;
  outputs: { mime_type: string; data: string }[];
  error: { name: string; value: string; traceback: string } | null;
  duration_ms: number;
  execution_count: number;
}

export interface Image {
  ref: string;
  digest: string;
  config?: string;
  layers?: string[];
  size?: number;
  created?: string | number | null;
}

export interface UsageGroup {
  key: string | null;
  records: number;
  cpu_seconds: number;
  memory_mb_seconds: number;
  duration_seconds: number;
}

export interface UsageReport {
  group_by: "profile" | "project" | "agent";
  from: string;
  to: string | null;
  groups: UsageGroup[];
  total: { records: number; cpu_seconds: number; memory_mb_seconds: number; duration_seconds: number };
}

export interface AuditEvent {
  seq: number;
  time: string;
  time_ms: number;
  tenant_id: number;
  actor: string;
  action: string;
  target: string;
  outcome: string;
  details: Record<string, unknown>;
  prev_hash: string;
  hash: string;
}

export interface AuditPage {
  events: AuditEvent[];
  next_cursor: number | null;
}

export interface AuditVerdict {
  ok: boolean;
  events: number;
  last_seq: number;
  head_hash: string;
  first_broken_seq: number | null;
  problem: string | null;
}

/**
 * One JSON Schema violation: `path` is the JSON pointer of the value at fault
 * ("" for the whole document; under "/input" for a tool's input), `message`
 * in the request's language.  The items of ContractValidation's `violations`
 * and of an error's `details.violations`.
 */
export interface Violation {
  path: string;
  message: string;
  message_i18n: { en: string; fr: string };
  /** The document of an apply the violation belongs to (apply errors only). */
  index?: number;
}

/** POST /v1/contracts/{name}/validate: `valid` exactly when `violations` is empty. */
export interface ContractValidation {
  valid: boolean;
  violations: Violation[];
}

/** The spec of a tool manifest: `command`, or `language` + `entrypoint` (docs/contracts.md). */
export interface ToolSpec {
  sandbox_profile: string;
  image: string;
  command?: string[];
  language?: "python" | "node" | "bash" | "javascript";
  entrypoint?: string;
  /** A draft-07 JSON Schema for the tool's input. */
  input_schema?: Record<string, unknown>;
  limits?: LimitsRequest;
  network?: NetworkRequest;
  /** Globs of files copied out after the run. */
  collect?: string[];
  timeout_s?: number;
}

/** A `tool-manifest` document (contracts/v1/tool-manifest.schema.json). */
export interface ToolManifest {
  apiVersion: "sandboxd/v1";
  kind: "Tool";
  /** description: what the tool does, for the people and models choosing it (MCP clients show it). */
  metadata: { name: string; description?: string; labels?: Record<string, string> };
  spec: ToolSpec;
}

/** A tool of the tenant, with its manifest as stored. */
export interface Tool {
  name: string;
  /** The manifest's spec.sandbox_profile. */
  profile: string;
  image: string;
  /** 1 when created; one more at each change. */
  generation: number;
  digest: string;
  manifest: ToolManifest;
  created_at: string;
  updated_at: string;
}

export interface ToolList {
  tools: Tool[];
  next_cursor: string | null;
}

/** What applying one document did. */
export interface ToolApplied {
  name: string;
  action: "created" | "updated" | "unchanged";
  tool: Tool;
}

/** POST /v1/manifests/apply: one result per document, in the order given. */
export interface ManifestApplyResult {
  dry_run: boolean;
  results: ToolApplied[];
}

/** POST /v1/tools/{name}/invoke: the queued execution. */
export interface ToolInvoked {
  id: string;
  status: "queued";
  profile: string;
  tool: string;
  generation: number;
}

/** An output chunk of a stream (`stdout` / `stderr` events). */
export interface OutputChunk {
  data?: string;
  data_base64?: string;
  offset: number;
}

/**
 * One event of an exec or process-output stream, narrowed by `event`
 * (events of other names, which this version of the API does not send,
 * are skipped).
 */
export type StreamEvent =
  | { event: "stdout" | "stderr"; data: OutputChunk; text: string; bytes: Uint8Array }
  | { event: "gap"; data: { stream: string; from: number; to: number; dropped_bytes: number } }
  | { event: "exit"; data: ExecResult; result: ExecResult };

/** One event of a watch stream. */
export interface WatchEvent {
  event: "ready" | "create" | "modify" | "delete" | "move" | "overflow" | "end" | string;
  data: { type?: string; path?: string; dir?: boolean; from?: string; to?: string;
          dropped?: number; reason?: string; [k: string]: unknown };
}

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}
