// index.ts — the package's entry point: @sandboxd/sdk.
export {
  Audit, BackgroundProcess, Client, ContextHandle, Contexts, Contracts, Executions, Images, Processes,
  Sandbox, SandboxSession, SessionFiles, Sessions, Tools, decodeOutput,
} from "./client.js";
export type {
  ApplyOptions, ExecRequest, ExecuteOptions, ExecutionRequest, FilesInput, SessionCreate, SessionPatch, StartRequest,
  ToolInvokeOptions, ToolRunOptions,
} from "./client.js";
export * from "./errors.js";
export { DEFAULT_URL, VERSION, parseSSE, shouldRetry } from "./http.js";
export type { CallOptions, ClientOptions, RetryInfo, TraceparentSource } from "./http.js";
export type {
  ExecStatus, OutputEncoding, Capability, Limits, LimitsRequest, NetworkRequest, Network, Profile, ProfileList, Session, SessionList, ResultError, ExecUsage, ExecResult, FileInfo, ExecutionUsage, ExecutionCreated, Execution, ExecutionList, InputFile, FileWritten, DirEntry, DirListing, FileStat, ArchiveExtracted, Process, ProcessOutput, Context, ContextRunResult, Image, UsageGroup, UsageReport, AuditEvent, AuditPage, AuditVerdict, OutputChunk, StreamEvent, WatchEvent, Page,
  Violation, ContractValidation, ToolSpec, ToolManifest, Tool, ToolList, ToolApplied, ManifestApplyResult, ToolInvoked,
} from "./models.js";
export { QUERY, ROUTES } from "./routes.js";
export type { Operation } from "./routes.js";
