package sandboxd

import (
	"context"
	"encoding/json"
)

// ContractsService is the named JSON Schema contracts (today
// "tool-manifest", docs/contracts.md) and validation against them; any
// tenant's key, nothing is stored.
type ContractsService struct{ t *transport }

// List is the contract names.
func (cs *ContractsService) List(ctx context.Context) ([]string, error) {
	var out struct {
		Contracts []string `json:"contracts"`
	}
	err := cs.t.json(ctx, &call{op: "listContracts"}, &out)
	return out.Contracts, err
}

// Get is the contract's JSON Schema (draft-07): the bytes the daemon
// serves as application/schema+json.
func (cs *ContractsService) Get(ctx context.Context, name string) (json.RawMessage, error) {
	b, err := cs.t.bytes(ctx, &call{op: "getContract", params: map[string]string{"name": name},
		accept: "application/schema+json, application/json"})
	return json.RawMessage(b), err
}

// Validate lists every violation of document (any value encoding/json
// marshals: a ToolManifest, a map, a json.RawMessage, …) against the
// contract, each with the JSON pointer of the value at fault.  A bad
// document is a result (Valid false), not an error.
func (cs *ContractsService) Validate(ctx context.Context, name string, document any) (*ContractValidation, error) {
	c := &call{op: "validateContract", params: map[string]string{"name": name}, json: document}
	if document == nil { // JSON null is a document too
		c.body, c.contentType = []byte("null"), "application/json"
	}
	var out ContractValidation
	return &out, cs.t.json(ctx, c, &out)
}

// ToolsService is the tools applied from tool manifests and run as
// executions in their spec.sandbox_profile.
type ToolsService struct{ t *transport }

// ApplyOptions tune Apply: DryRun checks and reports, storing nothing.
type ApplyOptions struct {
	DryRun bool
}

// Apply creates or updates tools: one manifest is sent as the document
// itself, several as {"items": […]} (1 to 64), applied all or nothing.
// Idempotent per name: each result's Action is "created", "updated" or
// "unchanged".  A bad document is an *APIError (ErrInvalidRequest) whose
// Violations list every violation, Index the document.
func (ts *ToolsService) Apply(ctx context.Context, manifests []ToolManifest, o *ApplyOptions) (*ManifestApplyResult, error) {
	docs := make([]ToolManifest, len(manifests))
	for i, m := range manifests {
		if m.APIVersion == "" {
			m.APIVersion = "sandboxd/v1"
		}
		if m.Kind == "" {
			m.Kind = "Tool"
		}
		docs[i] = m
	}
	var body any = map[string][]ToolManifest{"items": docs}
	if len(docs) == 1 {
		body = docs[0]
	}
	q := query{}
	if o != nil {
		q = q.flag("dry_run", o.DryRun)
	}
	var out ManifestApplyResult
	return &out, ts.t.json(ctx, &call{op: "applyManifests", query: q, json: body}, &out)
}

// List is one page of the tenant's tools, in name order (o's Limit and
// Cursor; Status does not apply).
func (ts *ToolsService) List(ctx context.Context, o *ListOptions) (*ToolList, error) {
	q := query{}
	if o != nil {
		q = q.num("limit", int64(o.Limit)).str("cursor", o.Cursor)
	}
	var out ToolList
	return &out, ts.t.json(ctx, &call{op: "listTools", query: q}, &out)
}

// Each calls fn for every tool of the tenant, in name order, following
// the cursors, until fn returns false.
func (ts *ToolsService) Each(ctx context.Context, o *ListOptions, fn func(*Tool) bool) error {
	return eachItem(o, fn, func(lo *ListOptions) ([]Tool, *string, error) {
		page, err := ts.List(ctx, lo)
		if err != nil {
			return nil, nil, err
		}
		return page.Tools, page.NextCursor, nil
	})
}

// Get is the tool with its manifest (ErrNotFound when there is none).
func (ts *ToolsService) Get(ctx context.Context, name string) (*Tool, error) {
	var out Tool
	return &out, ts.t.json(ctx, &call{op: "getTool", params: map[string]string{"name": name}}, &out)
}

// Delete deletes the tool; executions it started run on.
func (ts *ToolsService) Delete(ctx context.Context, name string) error {
	_, err := ts.t.send(ctx, &call{op: "deleteTool", params: map[string]string{"name": name},
		expect: []int{204}})
	return err
}

// InvokeOptions tune Invoke and Run: Metadata labels the execution (the
// daemon adds "tool" and "tool_generation").
type InvokeOptions struct {
	Metadata map[string]string
}

// Invoke queues an execution of the tool with this input (any value its
// input_schema accepts, marshalled by encoding/json; nil sends none: the
// daemon's default, {}), which the program reads as JSON on its standard
// input.  It answers at once with the execution's ID.  An input the
// schema refuses is an *APIError (ErrInvalidRequest) whose Violations
// have paths under "/input".
func (ts *ToolsService) Invoke(ctx context.Context, name string, input any, o *InvokeOptions) (*ToolInvoked, error) {
	req := ToolInvokeRequest{Input: input}
	if o != nil {
		req.Metadata = o.Metadata
	}
	var out ToolInvoked
	return &out, ts.t.json(ctx, &call{op: "invokeTool", params: map[string]string{"name": name},
		json: req, expect: []int{202}}, &out)
}

// Run invokes the tool, then long-polls (as Sandbox.Execute does) until
// the execution is final and returns it: its stdout, exit code, files.
// ctx bounds the whole wait.
func (ts *ToolsService) Run(ctx context.Context, name string, input any, o *InvokeOptions) (*Execution, error) {
	invoked, err := ts.Invoke(ctx, name, input, o)
	if err != nil {
		return nil, err
	}
	return (&ExecutionsService{ts.t}).Wait(ctx, invoked.ID, nil)
}
