package sandboxd

// Unit tests of the contracts and tools resources against scripted
// servers (client_test.go's fake).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

const toolJSON = `{"name":"add","profile":"container","image":"python:3.12-slim","generation":1,` +
	`"digest":"sha256:00","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z",` +
	`"manifest":{"apiVersion":"sandboxd/v1","kind":"Tool","metadata":{"name":"add"},` +
	`"spec":{"sandbox_profile":"container","image":"python:3.12-slim","command":["python3","add.py"],` +
	`"limits":{"cpu":0.5,"memory":268435456,"timeout_s":1.5}}}}`

func violation(path string, index ...int) string {
	idx := ""
	if len(index) > 0 {
		idx = fmt.Sprintf(`"index":%d,`, index[0])
	}
	return fmt.Sprintf(`{%s"path":%q,"message":"bad %s","message_i18n":{"en":"bad %s","fr":"mauvais %s"}}`,
		idx, path, path, path, path)
}

func TestContracts(t *testing.T) {
	f := newFake(t, reply(200, `{"contracts":["tool-manifest"]}`),
		reply(200, `{"type":"object"}`, "Content-Type", "application/schema+json"),
		reply(200, `{"valid":false,"violations":[`+violation("/spec/command")+`,`+violation("")+`]}`))
	c := f.client(t)
	names, err := c.Contracts.List(ctx)
	if err != nil || fmt.Sprint(names) != "[tool-manifest]" {
		t.Fatal(err, names)
	}
	schema, err := c.Contracts.Get(ctx, "tool-manifest")
	if err != nil || string(schema) != `{"type":"object"}` {
		t.Fatal(err, string(schema))
	}
	v, err := c.Contracts.Validate(ctx, "tool-manifest", map[string]string{"kind": "Tool"})
	if err != nil || v.Valid || len(v.Violations) != 2 || v.Violations[0].Path != "/spec/command" ||
		v.Violations[0].MessageI18n["fr"] != "mauvais /spec/command" || v.Violations[0].Index != nil {
		t.Fatalf("%v %+v", err, v)
	}
	r := f.seen()
	got := []string{}
	for _, x := range r {
		got = append(got, x.Method+" "+x.Path)
	}
	if strings.Join(got, ", ") != "GET /v1/contracts, GET /v1/contracts/tool-manifest, "+
		"POST /v1/contracts/tool-manifest/validate" || string(r[2].Body) != `{"kind":"Tool"}` {
		t.Fatalf("%v %s", got, r[2].Body)
	}
}

func TestApplyOneDocumentOrAList(t *testing.T) {
	f := newFake(t, reply(200, `{"dry_run":true,"results":[{"name":"add","action":"created","tool":`+toolJSON+`}]}`),
		reply(200, `{"dry_run":false,"results":[{"name":"add","action":"unchanged","tool":`+toolJSON+`},`+
			`{"name":"b","action":"updated","tool":{"name":"b","generation":2}}]}`))
	c := f.client(t)
	m := ToolManifest{Metadata: ToolMetadata{Name: "add"}, Spec: ToolSpec{SandboxProfile: "container",
		Image: "python:3.12-slim", Command: []string{"python3", "add.py"},
		InputSchema: map[string]any{"type": "object"}}}
	res, err := c.Tools.Apply(ctx, []ToolManifest{m}, &ApplyOptions{DryRun: true})
	if err != nil || !res.DryRun || res.Results[0].Action != "created" || res.Results[0].Tool.Generation != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	// a stored manifest's limits may hold numbers
	if l := res.Results[0].Tool.Manifest.Spec.Limits; l == nil || l.CPU != "0.5" || l.Memory != "268435456" ||
		l.TimeoutS != 2 {
		t.Fatalf("%+v", l)
	}
	m2 := m
	m2.Metadata.Name = "b"
	res, err = c.Tools.Apply(ctx, []ToolManifest{m, m2}, nil)
	if err != nil || len(res.Results) != 2 || res.Results[1].Action != "updated" || res.Results[1].Tool.Generation != 2 {
		t.Fatalf("%v %+v", err, res)
	}
	r := f.seen()
	want := `{"apiVersion":"sandboxd/v1","kind":"Tool","metadata":{"name":"add"},"spec":{"sandbox_profile":"container",` +
		`"image":"python:3.12-slim","command":["python3","add.py"],"input_schema":{"type":"object"}}}`
	if r[0].Path != "/v1/manifests/apply" || r[0].Query != "dry_run=true" || string(r[0].Body) != want {
		t.Fatalf("%s?%s %s", r[0].Path, r[0].Query, r[0].Body)
	}
	var items struct{ Items []ToolManifest }
	if r[1].Query != "" || json.Unmarshal(r[1].Body, &items) != nil || len(items.Items) != 2 ||
		items.Items[1].Metadata.Name != "b" || items.Items[1].Kind != "Tool" {
		t.Fatalf("%s %s", r[1].Query, r[1].Body)
	}
}

func TestViolationsOfAnApplyAndOfAnInput(t *testing.T) {
	f := newFake(t, reply(400, errBody("invalid_request", "bad", `{"field":"body","violations":[`+
		violation("/spec/image", 0)+`,`+violation("/metadata/name", 1)+`]}`)),
		reply(400, errBody("invalid_request", "bad", `{"field":"input","violations":[`+violation("/input/a")+`]}`)))
	c := f.client(t)
	_, err := c.Tools.Apply(ctx, []ToolManifest{{}, {}}, nil)
	var ae *APIError
	if !errors.Is(err, ErrInvalidRequest) || !errors.As(err, &ae) {
		t.Fatal(err)
	}
	vs := ae.Violations()
	if len(vs) != 2 || *vs[0].Index != 0 || vs[1].Path != "/metadata/name" || *vs[1].Index != 1 {
		t.Fatalf("%+v", vs)
	}
	_, err = c.Tools.Invoke(ctx, "add", map[string]string{"a": "x"}, nil)
	if !errors.As(err, &ae) || len(ae.Violations()) != 1 || ae.Violations()[0].Path != "/input/a" ||
		ae.Violations()[0].Index != nil || ae.Violations()[0].Message != "bad /input/a" {
		t.Fatal(err)
	}
	if len(f.seen()) != 2 || (&APIError{}).Violations() != nil {
		t.Fatal("retried, or violations out of nothing")
	}
}

func TestToolsListEachGetDelete(t *testing.T) {
	f := newFake(t, reply(200, `{"tools":[`+toolJSON+`],"next_cursor":"add"}`),
		reply(200, `{"tools":[{"name":"b"}],"next_cursor":null}`), reply(200, toolJSON), reply(204, ""),
		reply(404, errBody("not_found", "no such tool", "")))
	c := f.client(t)
	var names []string
	if err := c.Tools.Each(ctx, &ListOptions{Limit: 1}, func(x *Tool) bool { names = append(names, x.Name); return true }); err != nil ||
		fmt.Sprint(names) != "[add b]" {
		t.Fatal(err, names)
	}
	if tl, err := c.Tools.Get(ctx, "add"); err != nil || tl.Profile != "container" || tl.Manifest.Spec.Command[1] != "add.py" {
		t.Fatal(err, tl)
	}
	if err := c.Tools.Delete(ctx, "add"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tools.Get(ctx, "add"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	got := []string{}
	for _, x := range f.seen() {
		got = append(got, x.Method+" "+x.Path+"?"+x.Query)
	}
	if strings.Join(got, ", ") != "GET /v1/tools?limit=1, GET /v1/tools?cursor=add&limit=1, GET /v1/tools/add?, "+
		"DELETE /v1/tools/add?, GET /v1/tools/add?" {
		t.Fatal(got)
	}
}

func TestInvokeAndRun(t *testing.T) {
	inv := `{"id":"exe_1","status":"queued","profile":"container","tool":"add","generation":3}`
	f := newFake(t, reply(202, inv), reply(202, inv), reply(200, `{"id":"exe_1","status":"running"}`),
		reply(200, `{"id":"exe_1","status":"succeeded","exit_code":0,"stdout":"5\n","metadata":{"tool":"add"}}`))
	c := f.client(t)
	got, err := c.Tools.Invoke(ctx, "add", map[string]int{"a": 2, "b": 3}, &InvokeOptions{Metadata: map[string]string{"run": "r1"}})
	if err != nil || got.ID != "exe_1" || got.Tool != "add" || got.Generation != 3 {
		t.Fatal(err, got)
	}
	ex, err := c.Tools.Run(ctx, "add", nil, nil)
	if err != nil || ex.Status != "succeeded" || ex.Stdout != "5\n" || ex.Metadata["tool"] != "add" {
		t.Fatal(err, ex)
	}
	r := f.seen()
	if r[0].Path != "/v1/tools/add/invoke" || string(r[0].Body) != `{"input":{"a":2,"b":3},"metadata":{"run":"r1"}}` ||
		string(r[1].Body) != `{}` || r[2].Path != "/v1/sandbox/executions/exe_1" || r[2].Query != "wait_s=30" {
		t.Fatalf("%+v", r)
	}
	// the caller's context bounds the wait
	g := newFake(t, reply(202, inv), slow(50*time.Millisecond, reply(200, `{"id":"exe_1","status":"running"}`)))
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := g.client(t).Tools.Run(cctx, "add", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
}
