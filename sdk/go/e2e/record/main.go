// Command record prints, as JSON, the requests the SDK's public calls
// really send (method, path, query, JSON body), answered by a recording
// http.RoundTripper instead of a daemon.  tests/sdk/check_sdk_contract.py
// checks them against docs/api/openapi.yaml; between them these calls
// reach every route of routes.go.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	sandboxd "github.com/sandboxd/sandboxd/sdk/go"
)

type request struct {
	Method string              `json:"method"`
	Path   string              `json:"path"`
	Query  map[string][]string `json:"query"`
	JSON   any                 `json:"json"`
}

type recorder struct{ seen []request }

const canned = `{"id":"exe_000000000000000000000000","status":"succeeded","pid":7,"ref":"r",` +
	`"digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000",` +
	`"executions":[],"sessions":[],"events":[],"next_cursor":null}`

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	rq := request{Method: req.Method, Path: req.URL.EscapedPath(), Query: req.URL.Query()}
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/json") {
			if err := json.Unmarshal(b, &rq.JSON); err != nil {
				return nil, err
			}
		}
	}
	r.seen = append(r.seen, rq)
	// the status each call expects, so that handles come back
	status := 200
	switch {
	case req.Method == "DELETE":
		status = 204
	case req.Method == "PUT" || strings.HasSuffix(rq.Path, "/contexts") || rq.Path == "/v1/sandbox/sessions" && req.Method == "POST":
		status = 201
	case rq.Path == "/v1/sandbox/executions" && req.Method == "POST", strings.HasSuffix(rq.Path, "/invoke"),
		strings.HasSuffix(rq.Path, "/exec") && bytes.Contains(mustJSON(rq.JSON), []byte(`"background":true`)):
		status = 202
	}
	ctype, body := "application/json", canned
	if req.Header.Get("Accept") == "text/event-stream" {
		ctype, body = "text/event-stream", "" // a stream that ends at once
	} else if strings.HasSuffix(rq.Path, "/gc") || strings.HasSuffix(rq.Path, "/verify") {
		body = "{}" // answers whose fields clash with the canned one's
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {ctype}},
		Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func main() {
	rec := &recorder{}
	c, err := sandboxd.NewClient(sandboxd.WithBaseURL("http://127.0.0.1:1"), sandboxd.WithAPIKey("k"),
		sandboxd.WithHTTPClient(&http.Client{Transport: rec}), sandboxd.WithMaxRetries(0))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	errs := 0
	e := func(_ any, err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "record:", err)
			errs++
		}
	}
	ex := c.Sandbox.Executions
	e(ex.Create(ctx, &sandboxd.ExecutionCreateRequest{Image: "python:3.12-slim",
		Command: []string{"python", "-c", "1"}, Profile: "gvisor",
		Files: []sandboxd.InputFile{sandboxd.TextFile("/work/a", "x"),
			sandboxd.BinaryFile("/work/b", []byte{0, 1, 0xff})},
		Collect: []string{"/work/out/*"}, Stdin: "in", Env: map[string]string{"A": "1"},
		Limits:  &sandboxd.LimitsRequest{CPU: "500m", Memory: "256Mi", TimeoutS: 30},
		Network: &sandboxd.NetworkRequest{Egress: "none"}, Metadata: map[string]string{"k": "v"}}))
	e(ex.Create(ctx, &sandboxd.ExecutionCreateRequest{Language: "python", Code: "print(1)"}))
	e(c.Sandbox.Execute(ctx, "", []string{"true"}, nil))
	e(ex.Get(ctx, "exe_1", 5*time.Second))
	e(ex.Cancel(ctx, "exe_1"))
	e(ex.List(ctx, &sandboxd.ListOptions{Status: "succeeded", Limit: 5, Cursor: "c"}))
	e(ex.Download(ctx, "exe_1", "/work/out/r.txt"))

	ss := c.Sandbox.Sessions
	e(ss.Create(ctx, &sandboxd.SessionCreateRequest{Profile: "container", Image: "host",
		Limits:  &sandboxd.LimitsRequest{Memory: "128Mi"},
		Network: &sandboxd.NetworkRequest{Egress: "allowlist", Allow: []string{"pypi.org"}},
		Env:     map[string]string{"A": "b"}, Metadata: map[string]string{"a": "b"}, TTLS: 60}))
	e(ss.Get(ctx, "ses_1"))
	e(ss.List(ctx, &sandboxd.ListOptions{Status: "ready", Limit: 5, Cursor: "c"}))
	e(ss.Update(ctx, "ses_1", &sandboxd.SessionPatchRequest{TTLS: 10, ClearMetadata: true, ResetNetwork: true}))
	e(ss.Update(ctx, "ses_1", &sandboxd.SessionPatchRequest{Metadata: map[string]string{"a": "c"},
		Network: &sandboxd.NetworkRequest{Egress: "none"}}))
	s := ss.Session("ses_1")
	e(s.Exec(ctx, []string{"ls"}, &sandboxd.ExecRequest{Stdin: "x", Env: map[string]string{"A": "1"},
		Cwd: "/tmp", TimeoutS: 5}))
	e(s.Exec(ctx, nil, &sandboxd.ExecRequest{Language: "bash", Code: "echo"}))
	e(s.ExecStream(ctx, []string{"echo"}, nil, nil))
	e(s.Start(ctx, []string{"sleep", "1"}, &sandboxd.ExecRequest{Pty: &sandboxd.PtySize{Cols: 80, Rows: 24}}))
	p := s.Processes
	e(p.List(ctx))
	e(p.Get(ctx, 7))
	e(p.Output(ctx, 7, &sandboxd.OutputOptions{Offset: 1, StdoutOffset: 2, StderrOffset: 3}))
	e(p.Follow(ctx, 7, nil))
	e(p.Stdin(ctx, 7, []byte("x"), true))
	e(p.Signal(ctx, 7, "TERM"))
	e(nil, p.Resize(ctx, 7, 100, 30))
	f := s.Files
	e(f.Put(ctx, "/work/a", []byte("x")))
	e(f.Get(ctx, "/work/a"))
	e(f.List(ctx, "/work", &sandboxd.DirOptions{Recursive: true, MaxDepth: 2}))
	e(f.Stat(ctx, "/work/a"))
	e(nil, f.Delete(ctx, "/work/a"))
	e(f.Mkdir(ctx, "/work/d", &sandboxd.MkdirOptions{Parents: true, Mode: "0750"}))
	e(f.Move(ctx, "/work/a", "/work/b", true))
	e(f.Archive(ctx, "/work", &sandboxd.ArchiveOptions{MaxEntries: 10, MaxBytes: 1 << 20}))
	e(f.Extract(ctx, "/work/x", []byte("tar"), &sandboxd.ArchiveOptions{MaxEntries: 10, MaxBytes: 1 << 20}))
	e(s.Watch(ctx, "/work", true))
	cs := s.Contexts
	e(cs.Create(ctx, "python"))
	e(cs.List(ctx))
	e(cs.Get(ctx, "ctx_1"))
	e(cs.Run(ctx, "ctx_1", "1+1", 3))
	e(cs.Restart(ctx, "ctx_1"))
	e(nil, cs.Delete(ctx, "ctx_1"))
	e(nil, s.Delete(ctx))

	e(c.Images.List(ctx))
	e(c.Images.Pull(ctx, "python:3.12-slim", nil))
	e(nil, c.Images.Delete(ctx, "127.0.0.1:5000/tools/jq:1"))
	e(c.Images.GC(ctx))
	e(c.Contracts.List(ctx))
	e(c.Contracts.Get(ctx, "tool-manifest"))
	e(c.Contracts.Validate(ctx, "tool-manifest", map[string]any{"apiVersion": "sandboxd/v1", "kind": "Tool"}))
	m := sandboxd.ToolManifest{Metadata: sandboxd.ToolMetadata{Name: "add-numbers", Description: "Adds a and b.",
		Labels: map[string]string{"team": "tools"}},
		Spec: sandboxd.ToolSpec{SandboxProfile: "container", Image: "python:3.12-slim",
			Command:     []string{"python3", "-c", "print(1)"},
			InputSchema: map[string]any{"type": "object", "required": []string{"a"}},
			Limits:      &sandboxd.LimitsRequest{CPU: "500m", TimeoutS: 30},
			Network:     &sandboxd.NetworkRequest{Egress: "none"}, Collect: []string{"/work/out/*"}, TimeoutS: 30}}
	other := sandboxd.ToolManifest{Metadata: sandboxd.ToolMetadata{Name: "other"},
		Spec: sandboxd.ToolSpec{SandboxProfile: "container", Image: "host", Language: "python", Entrypoint: "main.py"}}
	tl := c.Tools
	e(tl.Apply(ctx, []sandboxd.ToolManifest{m}, &sandboxd.ApplyOptions{DryRun: true}))
	e(tl.Apply(ctx, []sandboxd.ToolManifest{m, other}, nil))
	e(tl.List(ctx, &sandboxd.ListOptions{Limit: 5, Cursor: "a"}))
	e(tl.Get(ctx, "add-numbers"))
	e(tl.Invoke(ctx, "add-numbers", map[string]int{"a": 2, "b": 3},
		&sandboxd.InvokeOptions{Metadata: map[string]string{"run": "r1"}}))
	e(tl.Run(ctx, "add-numbers", []any{1, "x"}, nil))
	e(nil, tl.Delete(ctx, "add-numbers"))
	e(c.Profiles(ctx))
	e(c.Healthz(ctx))
	e(c.Readyz(ctx))
	e(c.Usage(ctx, &sandboxd.UsageOptions{GroupBy: "project", From: "2026-01-01T00:00:00Z", To: "1767225600"}))
	e(c.Audit.List(ctx, &sandboxd.AuditListOptions{Tenant: 1, Action: "sandbox.execute", After: 2, Limit: 5}))
	e(c.Audit.Verify(ctx))

	// every call above is expected to succeed against the canned answers,
	// except the exec stream (an empty stream ends without exit)
	if errs != 1 {
		fmt.Fprintf(os.Stderr, "record: %d calls failed, expected only the exec stream\n", errs)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(rec.seen)
}
