package sandboxd

// The API's JSON objects as Go types: each struct named like a schema of
// docs/api/openapi.yaml has that schema's properties as its json tags
// (tests/sdk/check_sdk_contract.py checks them: one field a line).  A
// struct embedded in another (Output, UsageCounts, DirEntry) adds its
// fields to it, in JSON as in that check.  Timestamps are kept as the RFC
// 3339 strings the daemon sends; a JSON null reads as the zero value,
// except where nil and zero differ (exit codes, signals, cursors), which
// are pointers.

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"unicode/utf8"
)

// Limits are a sandbox's effective limits.
type Limits struct {
	CPU         string `json:"cpu"`
	Memory      string `json:"memory"`
	Disk        string `json:"disk"`
	Pids        int    `json:"pids"`
	TimeoutS    int    `json:"timeout_s"`
	OutputBytes int64  `json:"output_bytes"`
}

// LimitsRequest asks for limits: any subset.  Quantities are strings
// ("500m", "2", "256Mi", "1G") or plain numbers written as strings.
type LimitsRequest struct {
	CPU         string `json:"cpu,omitempty"`
	Memory      string `json:"memory,omitempty"`
	Disk        string `json:"disk,omitempty"`
	Pids        int    `json:"pids,omitempty"`
	TimeoutS    int    `json:"timeout_s,omitempty"`
	OutputBytes string `json:"output_bytes,omitempty"`
}

// UnmarshalJSON reads limits as a stored tool manifest may hold them:
// quantities as strings or JSON numbers (kept as their text), timeout_s
// with a fraction (rounded up, as the daemon does).
func (l *LimitsRequest) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*l = LimitsRequest{}
	var err error
	for k, v := range raw {
		switch k {
		case "cpu":
			l.CPU, err = quantity(v)
		case "memory":
			l.Memory, err = quantity(v)
		case "disk":
			l.Disk, err = quantity(v)
		case "output_bytes":
			l.OutputBytes, err = quantity(v)
		case "pids":
			err = json.Unmarshal(v, &l.Pids)
		case "timeout_s":
			var f float64
			err = json.Unmarshal(v, &f)
			l.TimeoutS = int(math.Ceil(f))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// quantity is a JSON string's value, or a JSON number's text.
func quantity(v json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return "", err
	}
	return n.String(), nil
}

// NetworkRequest asks for an egress policy: "none", or "allowlist" with
// Allow (host names, *.suffix, CIDRs).
type NetworkRequest struct {
	Egress string   `json:"egress,omitempty"`
	Allow  []string `json:"allow,omitempty"`
}

// Network is a session's egress policy.
type Network struct {
	Egress string   `json:"egress"`
	Allow  []string `json:"allow,omitempty"`
}

// Profile is one sandbox profile (container, gvisor, microvm, …).
type Profile struct {
	Name            string   `json:"name"`
	Driver          string   `json:"driver"`
	Class           string   `json:"class"`
	Image           string   `json:"image"`
	Available       bool     `json:"available"`
	State           string   `json:"state"`
	Capabilities    []string `json:"capabilities"`
	Limits          Limits   `json:"limits"`
	MaxLimits       Limits   `json:"max_limits"`
	DefaultTimeoutS int      `json:"default_timeout_s"`
	PoolSize        int      `json:"pool_size"`
	Default         bool     `json:"default"`
	Reason          string   `json:"reason"`
	Platform        string   `json:"platform,omitempty"`
	PlatformNote    string   `json:"platform_note,omitempty"`
	// Accel: the accelerator of a dedicated-kernel profile (microvm, kata): kvm or tcg.
	Accel string `json:"accel,omitempty"`
}

// ProfileList is GET /v1/sandbox/profiles.
type ProfileList struct {
	Profiles []Profile `json:"profiles"`
	Default  string    `json:"default"`
}

// Get is the profile of that name, or nil.
func (l *ProfileList) Get(name string) *Profile {
	for i := range l.Profiles {
		if l.Profiles[i].Name == name {
			return &l.Profiles[i]
		}
	}
	return nil
}

// Health is GET /healthz.
type Health struct {
	Status string `json:"status"`
}

// Readiness is GET /readyz (also when it says "not ready").
type Readiness struct {
	Status string         `json:"status"`
	Checks map[string]any `json:"checks"`
}

// Session is a session's state.
type Session struct {
	ID           string            `json:"id"`
	Status       string            `json:"status"`
	Reason       string            `json:"reason"`
	Profile      string            `json:"profile"`
	Runtime      string            `json:"runtime"`
	Image        string            `json:"image"`
	Limits       Limits            `json:"limits"`
	Network      Network           `json:"network"`
	Capabilities []string          `json:"capabilities"`
	CreatedAt    string            `json:"created_at"`
	ExpiresAt    string            `json:"expires_at"`
	UpdatedAt    string            `json:"updated_at"`
	Metadata     map[string]string `json:"metadata"`
	TTLS         int               `json:"ttl_s"`
}

// SessionList is one page of GET /v1/sandbox/sessions.
type SessionList struct {
	Sessions   []Session `json:"sessions"`
	NextCursor *string   `json:"next_cursor"`
}

// SessionCreateRequest is the body of POST /v1/sandbox/sessions.
type SessionCreateRequest struct {
	Profile  string            `json:"profile,omitempty"`
	Image    string            `json:"image,omitempty"`
	Limits   *LimitsRequest    `json:"limits,omitempty"`
	Network  *NetworkRequest   `json:"network,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	TTLS     int               `json:"ttl_s,omitempty"`
}

// SessionPatchRequest is the body of PATCH /v1/sandbox/sessions/{id}:
// only what is set changes.  ResetNetwork sends "network": null (back to
// egress none), ClearMetadata "metadata": null (no labels).
type SessionPatchRequest struct {
	Network       *NetworkRequest   `json:"network,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	TTLS          int               `json:"ttl_s,omitempty"`
	ResetNetwork  bool              `json:"-"`
	ClearMetadata bool              `json:"-"`
}

// MarshalJSON writes the fields set, and the nulls asked for.
func (p SessionPatchRequest) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if p.Network != nil {
		m["network"] = p.Network
	} else if p.ResetNetwork {
		m["network"] = nil
	}
	if p.Metadata != nil {
		m["metadata"] = p.Metadata
	} else if p.ClearMetadata {
		m["metadata"] = nil
	}
	if p.TTLS != 0 {
		m["ttl_s"] = p.TTLS
	}
	return json.Marshal(m)
}

// ResultError says why a run ended without a normal exit.
type ResultError struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// ExecUsage is what one exec used.
type ExecUsage struct {
	CPUSeconds      float64 `json:"cpu_seconds"`
	MemoryPeakBytes int64   `json:"memory_peak_bytes"`
	OOMKills        int     `json:"oom_kills"`
}

// Output is the captured output of a run, embedded in ExecResult,
// Execution and ContextRunResult: text, or base64 when its encoding is
// "base64" (output that was not UTF-8); Truncated when bytes past the
// output limit were dropped.
type Output struct {
	Stdout          string `json:"stdout"`
	StdoutEncoding  string `json:"stdout_encoding"`
	Stderr          string `json:"stderr"`
	StderrEncoding  string `json:"stderr_encoding"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
}

// StdoutBytes is the raw stdout (decoded when it was not UTF-8).
func (o *Output) StdoutBytes() []byte { return DecodeOutput(o.Stdout, o.StdoutEncoding) }

// StderrBytes is the raw stderr.
func (o *Output) StderrBytes() []byte { return DecodeOutput(o.Stderr, o.StderrEncoding) }

// ExecResult is the result of a command in a session.  A non-zero exit,
// a timeout or an OOM kill is a result (Status says which), not an error.
type ExecResult struct {
	Status   string `json:"status"`
	Reason   string `json:"reason"`
	ExitCode *int   `json:"exit_code"`
	Signal   *int   `json:"signal"`
	Output
	StdoutDroppedBytes int64        `json:"stdout_dropped_bytes"`
	StderrDroppedBytes int64        `json:"stderr_dropped_bytes"`
	DurationMS         int64        `json:"duration_ms"`
	Usage              ExecUsage    `json:"usage"`
	Error              *ResultError `json:"error"`
}

// ExecRequest is the body of POST /v1/sandbox/sessions/{id}/exec: a
// Command, or Language ("python", "node", "bash") and Code.
type ExecRequest struct {
	Command    []string          `json:"command,omitempty"`
	Language   string            `json:"language,omitempty"`
	Code       string            `json:"code,omitempty"`
	Stdin      string            `json:"stdin,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Cwd        string            `json:"cwd,omitempty"`
	TimeoutS   int               `json:"timeout_s,omitempty"`
	Background bool              `json:"background,omitempty"` // set by Start
	Pty        *PtySize          `json:"pty,omitempty"`        // background only
}

// PtySize is a terminal's size.
type PtySize struct {
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
}

// FileInfo is a collected file of an execution.
type FileInfo struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ExecutionUsage is what an execution used.
type ExecutionUsage struct {
	CPUSeconds      float64 `json:"cpu_seconds"`
	MemoryMBSeconds float64 `json:"memory_mb_seconds"`
	DurationSeconds float64 `json:"duration_seconds"`
	MemoryPeakBytes int64   `json:"memory_peak_bytes"`
}

// InputFile is a file written into the sandbox before an execution runs:
// text, or base64 with Encoding "base64".  TextFile and BinaryFile make
// one.
type InputFile struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
	Mode     string `json:"mode,omitempty"`
}

// TextFile is an input file with this text.
func TextFile(path, text string) InputFile { return InputFile{Path: path, Content: text} }

// BinaryFile is an input file with these bytes (sent as text when they are
// UTF-8, else base64).
func BinaryFile(path string, data []byte) InputFile {
	if utf8.Valid(data) {
		return InputFile{Path: path, Content: string(data)}
	}
	return InputFile{Path: path, Content: base64.StdEncoding.EncodeToString(data), Encoding: "base64"}
}

// ExecutionCreateRequest is the body of POST /v1/sandbox/executions: an
// image (or the profile's), a Command or Language and Code, input Files,
// the globs to Collect after the run.
type ExecutionCreateRequest struct {
	Profile  string            `json:"profile,omitempty"`
	Image    string            `json:"image,omitempty"`
	Command  []string          `json:"command,omitempty"`
	Language string            `json:"language,omitempty"`
	Code     string            `json:"code,omitempty"`
	Files    []InputFile       `json:"files,omitempty"`
	Collect  []string          `json:"collect,omitempty"`
	Stdin    string            `json:"stdin,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Limits   *LimitsRequest    `json:"limits,omitempty"`
	Network  *NetworkRequest   `json:"network,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// ExecutionCreated is the answer of POST /v1/sandbox/executions.
type ExecutionCreated struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Profile string `json:"profile"`
}

// Execution is an execution's state; final once Status is succeeded,
// failed, timeout, oom_killed, killed or error.  Stdout and Stderr are
// empty in list items.
type Execution struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Reason   string `json:"reason"`
	Profile  string `json:"profile"`
	ExitCode *int   `json:"exit_code"`
	Signal   *int   `json:"signal"`
	Output
	StdoutDroppedBytes int64             `json:"stdout_dropped_bytes"`
	StderrDroppedBytes int64             `json:"stderr_dropped_bytes"`
	Files              []FileInfo        `json:"files"`
	Usage              ExecutionUsage    `json:"usage"`
	CreatedAt          string            `json:"created_at"`
	StartedAt          string            `json:"started_at"`
	FinishedAt         string            `json:"finished_at"`
	Error              *ResultError      `json:"error"`
	Metadata           map[string]string `json:"metadata"`
}

// Final reports whether the execution has ended.
func (e *Execution) Final() bool { return finalStatus[e.Status] }

var finalStatus = map[string]bool{"succeeded": true, "failed": true, "timeout": true,
	"oom_killed": true, "killed": true, "error": true}

// ExecutionList is one page of GET /v1/sandbox/executions.
type ExecutionList struct {
	Executions []Execution `json:"executions"`
	NextCursor *string     `json:"next_cursor"`
}

// FileWritten is the answer of a file upload.
type FileWritten struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Type  string `json:"type"`
	Size  int64  `json:"size"`
	Mode  string `json:"mode"`
	Mtime int64  `json:"mtime"`
}

// DirListing is a directory listing.
type DirListing struct {
	Entries []DirEntry `json:"entries"`
}

// FileStat is one file's metadata: a DirEntry, and a symlink's target.
type FileStat struct {
	DirEntry
	LinkTarget string `json:"link_target,omitempty"`
}

// FileMove is the body of POST …/files/move.
type FileMove struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Overwrite bool   `json:"overwrite"`
}

// ArchiveExtracted is the answer of an archive upload.
type ArchiveExtracted struct {
	Path    string `json:"path"`
	Entries int    `json:"entries"`
	Bytes   int64  `json:"bytes"`
}

// Process is a background process of a session.
type Process struct {
	PID          int        `json:"pid"`
	Command      []string   `json:"command"`
	Status       string     `json:"status"` // running, exited
	ExitCode     *int       `json:"exit_code"`
	Signal       *int       `json:"signal"`
	StartedAt    string     `json:"started_at"`
	FinishedAt   string     `json:"finished_at"`
	Pty          ProcessPty `json:"pty"`
	ResultStatus string     `json:"result_status,omitempty"`
	Reason       string     `json:"reason,omitempty"`
	Usage        *ExecUsage `json:"usage,omitempty"`
	StdoutBytes  int64      `json:"stdout_bytes,omitempty"`
	StderrBytes  int64      `json:"stderr_bytes,omitempty"`
}

// ProcessPty is a process's terminal: false in JSON when it has none.
type ProcessPty struct {
	Enabled bool
	Cols    int
	Rows    int
}

// UnmarshalJSON reads false or {cols, rows}.
func (p *ProcessPty) UnmarshalJSON(b []byte) error {
	var on bool
	if json.Unmarshal(b, &on) == nil {
		*p = ProcessPty{}
		return nil
	}
	var s PtySize
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*p = ProcessPty{Enabled: true, Cols: s.Cols, Rows: s.Rows}
	return nil
}

// MarshalJSON writes false or {cols, rows}.
func (p ProcessPty) MarshalJSON() ([]byte, error) {
	if !p.Enabled {
		return []byte("false"), nil
	}
	return json.Marshal(PtySize{Cols: p.Cols, Rows: p.Rows})
}

// ProcessOutput is the kept output of a background process from the
// offsets asked for (the schema describes these keys in prose).
type ProcessOutput struct {
	Stdout             string      `json:"stdout"`
	StdoutEncoding     string      `json:"stdout_encoding"`
	StdoutOffset       int64       `json:"stdout_offset"`
	StdoutNextOffset   int64       `json:"stdout_next_offset"`
	StdoutDroppedBytes int64       `json:"stdout_dropped_bytes"`
	StdoutSkipped      bool        `json:"stdout_skipped"`
	StdoutGapAt        *int64      `json:"stdout_gap_at"`
	Stderr             string      `json:"stderr"`
	StderrEncoding     string      `json:"stderr_encoding"`
	StderrOffset       int64       `json:"stderr_offset"`
	StderrNextOffset   int64       `json:"stderr_next_offset"`
	StderrDroppedBytes int64       `json:"stderr_dropped_bytes"`
	StderrSkipped      bool        `json:"stderr_skipped"`
	StderrGapAt        *int64      `json:"stderr_gap_at"`
	Status             string      `json:"status"`
	Result             *ExecResult `json:"result"`
}

// StdinWritten is the answer of a stdin write.
type StdinWritten struct {
	Written int64 `json:"written"`
	EOF     bool  `json:"eof"`
}

// Signalled is the answer of a signal.
type Signalled struct {
	PID    int `json:"pid"`
	Signal int `json:"signal"`
}

// ContextCreate is the body of POST …/contexts.
type ContextCreate struct {
	Language string `json:"language"`
}

// Context is a stateful interpreter (python, node) in a session.
type Context struct {
	ID             string `json:"id"`
	Language       string `json:"language"`
	Status         string `json:"status"`
	SessionID      string `json:"session_id"`
	ExecutionCount int    `json:"execution_count"`
	Version        string `json:"version"`
	Error          string `json:"error"`
	CreatedAt      string `json:"created_at"`
}

// ContextRunRequest is the body of POST …/contexts/{cid}/run.
type ContextRunRequest struct {
	Code     string `json:"code"`
	TimeoutS int    `json:"timeout_s,omitempty"`
}

// ContextOutput is one rich output of a context run (an image/png figure, …).
type ContextOutput struct {
	MimeType string `json:"mime_type"`
	Data     string `json:"data"`
}

// ContextError is the exception a context run raised.
type ContextError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// ContextRunResult is the result of code run in a context; Result is the
// repr of the last expression's value, nil without one.
type ContextRunResult struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
	Output
	Result         *string         `json:"result"`
	Outputs        []ContextOutput `json:"outputs"`
	Error          *ContextError   `json:"error"`
	DurationMS     int64           `json:"duration_ms"`
	ExecutionCount int             `json:"execution_count"`
}

// Image is a stored image.
type Image struct {
	Ref     string          `json:"ref"`
	Digest  string          `json:"digest"`
	Config  string          `json:"config,omitempty"`
	Layers  []string        `json:"layers,omitempty"`
	Size    int64           `json:"size,omitempty"`
	Created json.RawMessage `json:"created,omitempty"`
}

// PulledImage is the answer of a pull.
type PulledImage struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

// PullProgress is one progress event of a streamed pull.
type PullProgress struct {
	Blob  string `json:"blob"`
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
}

// UsageCounts are the amounts of a usage group, or of the whole report.
type UsageCounts struct {
	Records         int64   `json:"records"`
	CPUSeconds      float64 `json:"cpu_seconds"`
	MemoryMBSeconds float64 `json:"memory_mb_seconds"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// UsageGroup is one group of a usage report (Key "" for records without one).
type UsageGroup struct {
	Key string `json:"key"`
	UsageCounts
}

// UsageReport is GET /v1/sandbox/usage.
type UsageReport struct {
	GroupBy string       `json:"group_by"`
	From    string       `json:"from"`
	To      string       `json:"to"`
	Groups  []UsageGroup `json:"groups"`
	Total   UsageCounts  `json:"total"`
}

// AuditEvent is one event of the audit log.
type AuditEvent struct {
	Seq      int64          `json:"seq"`
	Time     string         `json:"time"`
	TimeMS   int64          `json:"time_ms"`
	TenantID int64          `json:"tenant_id"`
	Actor    string         `json:"actor"`
	Action   string         `json:"action"`
	Target   string         `json:"target"`
	Outcome  string         `json:"outcome"`
	Details  map[string]any `json:"details"`
	PrevHash string         `json:"prev_hash"`
	Hash     string         `json:"hash"`
}

// AuditPage is one page of GET /v1/audit.
type AuditPage struct {
	Events     []AuditEvent `json:"events"`
	NextCursor *int64       `json:"next_cursor"`
}

// AuditVerdict is GET /v1/audit/verify.
type AuditVerdict struct {
	OK             bool   `json:"ok"`
	Events         int64  `json:"events"`
	LastSeq        int64  `json:"last_seq"`
	HeadHash       string `json:"head_hash"`
	FirstBrokenSeq *int64 `json:"first_broken_seq"`
	Problem        string `json:"problem"`
}

// Violation is one JSON Schema violation: Path is the JSON pointer of the
// value at fault ("" for the whole document; under "/input" for a tool's
// input), Message in the client's language, Index the document of an
// apply it belongs to (nil elsewhere).  The items of
// ContractValidation.Violations and of APIError.Violations.
type Violation struct {
	Index       *int              `json:"index,omitempty"`
	Path        string            `json:"path"`
	Message     string            `json:"message"`
	MessageI18n map[string]string `json:"message_i18n"`
}

// ContractValidation is the verdict of POST /v1/contracts/{name}/validate:
// Valid exactly when Violations is empty.
type ContractValidation struct {
	Valid      bool        `json:"valid"`
	Violations []Violation `json:"violations"`
}

// ToolManifest is a tool-manifest document
// (contracts/v1/tool-manifest.schema.json, docs/contracts.md).  Tools.Apply
// fills an empty APIVersion and Kind ("sandboxd/v1", "Tool").
type ToolManifest struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   ToolMetadata `json:"metadata"`
	Spec       ToolSpec     `json:"spec"`
}

// ToolMetadata names a tool (lower-case letters, digits and '-', at most
// 63), says what it does (Description: MCP clients show it) and labels it.
type ToolMetadata struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// ToolSpec is what a tool runs: in SandboxProfile on Image, a Command, or
// Language ("python", "node", "bash") and Entrypoint; InputSchema is a
// draft-07 JSON Schema of its input; Collect globs the files kept after
// the run.
type ToolSpec struct {
	SandboxProfile string          `json:"sandbox_profile"`
	Image          string          `json:"image"`
	Command        []string        `json:"command,omitempty"`
	Language       string          `json:"language,omitempty"`
	Entrypoint     string          `json:"entrypoint,omitempty"`
	InputSchema    map[string]any  `json:"input_schema,omitempty"`
	Limits         *LimitsRequest  `json:"limits,omitempty"`
	Network        *NetworkRequest `json:"network,omitempty"`
	Collect        []string        `json:"collect,omitempty"`
	TimeoutS       float64         `json:"timeout_s,omitempty"`
}

// Tool is a tool of the tenant with its manifest as stored; Generation is
// 1 when created, one more at each change.
type Tool struct {
	Name       string       `json:"name"`
	Profile    string       `json:"profile"`
	Image      string       `json:"image"`
	Generation int          `json:"generation"`
	Digest     string       `json:"digest"`
	Manifest   ToolManifest `json:"manifest"`
	CreatedAt  string       `json:"created_at"`
	UpdatedAt  string       `json:"updated_at"`
}

// ToolList is one page of GET /v1/tools, in name order.
type ToolList struct {
	Tools      []Tool  `json:"tools"`
	NextCursor *string `json:"next_cursor"`
}

// ToolApplied is what applying one document did: Action "created",
// "updated" or "unchanged".
type ToolApplied struct {
	Name   string `json:"name"`
	Action string `json:"action"`
	Tool   Tool   `json:"tool"`
}

// ManifestApplyResult is the answer of POST /v1/manifests/apply: one
// result per document, in the order given.
type ManifestApplyResult struct {
	DryRun  bool          `json:"dry_run"`
	Results []ToolApplied `json:"results"`
}

// ToolInvokeRequest is the body of POST /v1/tools/{name}/invoke: Input is
// any JSON value (nil sends none: the daemon's default, {}).
type ToolInvokeRequest struct {
	Input    any               `json:"input,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// ToolInvoked is the answer of an invoke: the queued execution's ID.
type ToolInvoked struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Profile    string `json:"profile"`
	Tool       string `json:"tool"`
	Generation int    `json:"generation"`
}

// OutputChunk is the data of a stdout / stderr stream event.
type OutputChunk struct {
	Data       *string `json:"data,omitempty"`
	DataBase64 *string `json:"data_base64,omitempty"`
	Offset     int64   `json:"offset"`
}

// OutputGap is the data of a gap stream event: bytes dropped from a stream.
type OutputGap struct {
	Stream       string `json:"stream"`
	From         int64  `json:"from"`
	To           int64  `json:"to"`
	DroppedBytes int64  `json:"dropped_bytes"`
}

// DecodeOutput is the bytes of a captured output: text as is, or decoded
// when its encoding is "base64".
func DecodeOutput(text, encoding string) []byte {
	if encoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(text)
		if err == nil {
			return b
		}
	}
	return []byte(text)
}
