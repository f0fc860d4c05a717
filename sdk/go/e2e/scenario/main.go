// Command scenario is the SDK scenario, Go side (tests/sdk/test_sdk.py
// runs it against a real daemon; tests/sdk/scenario.py and
// sdk/typescript/e2e/scenario.mjs are the same scenario in Python and
// TypeScript).  Environment: SANDBOXD_URL, SANDBOXD_API_KEY (a plain
// tenant), SBX_ADMIN_KEY, SBX_RATE_KEY (a tenant with a tiny rate limit),
// SBX_REGISTRY_IMAGE (an image on a loopback registry), SBX_SEED_PROFILE
// (the seed example's profile).  Prints one line per step; exits 1 on the
// first failed check.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	sandboxd "github.com/sandboxd/sandboxd/sdk/go"
)

func step(s string) { fmt.Printf("[go] %s\n", s) }

func check(ok bool, what ...any) {
	if !ok {
		fmt.Fprintln(os.Stderr, append([]any{"[go] check failed:"}, what...)...)
		os.Exit(1)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		fmt.Fprintln(os.Stderr, "[go] unexpected error:", err)
		os.Exit(1)
	}
	return v
}

func ok(err error) {
	must(0, err)
}

func intIs(p *int, v int) bool { return p != nil && *p == v }

func main() {
	ctx := context.Background()
	admin := must(sandboxd.NewClient(sandboxd.WithAPIKey(os.Getenv("SBX_ADMIN_KEY"))))
	client := must(sandboxd.NewClient()) // SANDBOXD_URL / SANDBOXD_API_KEY
	regImage := os.Getenv("SBX_REGISTRY_IMAGE")
	seedProfile := os.Getenv("SBX_SEED_PROFILE")
	if seedProfile == "" {
		seedProfile = "gvisor"
	}

	step("images: pull from the loopback registry with progress")
	pulled := must(admin.Images.Pull(ctx, regImage, func(sandboxd.PullProgress) {}))
	check(strings.HasPrefix(pulled.Digest, "sha256:"), pulled)
	found := false
	for _, im := range must(client.Images.List(ctx)) {
		found = found || im.Ref == "docker.io/library/python:3.12-slim"
	}
	check(found, "python:3.12-slim not listed")

	step("the seed's execute example, as written")
	c := must(sandboxd.NewClient(sandboxd.WithBaseURL(os.Getenv("SANDBOXD_URL")),
		sandboxd.WithAPIKey(os.Getenv("SANDBOXD_API_KEY"))))
	ex := must(c.Sandbox.Execute(ctx, "python:3.12-slim", []string{"python", "-c", "print(1)"},
		&sandboxd.ExecutionCreateRequest{Profile: seedProfile}))
	check(ex.Status == "succeeded" && intIs(ex.ExitCode, 0) && ex.Stdout == "1\n", ex)

	step("execute on the pulled image with files in and collected files out")
	ex = must(client.Sandbox.Execute(ctx, regImage, []string{"python", "-c",
		"import os; os.makedirs('/work/out', exist_ok=True); " +
			"open('/work/out/r.txt','w').write(open('/work/in.txt').read().upper())"},
		&sandboxd.ExecutionCreateRequest{Profile: "container",
			Files:   []sandboxd.InputFile{sandboxd.BinaryFile("/work/in.txt", []byte("hello sdk"))},
			Collect: []string{"/work/out/*"}, Metadata: map[string]string{"project": "sdk"}}))
	check(ex.Status == "succeeded" && len(ex.Files) == 1 && ex.Files[0].Path == "/work/out/r.txt", ex)
	check(string(must(client.Sandbox.Executions.Download(ctx, ex.ID, "/work/out/r.txt"))) == "HELLO SDK",
		"download")
	listed := false
	for _, e := range must(client.Sandbox.Executions.List(ctx, &sandboxd.ListOptions{Limit: 50})).Executions {
		listed = listed || e.ID == ex.ID
	}
	check(listed, "execution not listed")

	step("a timeout: limits.timeout_s ends the run")
	ex = must(client.Sandbox.Execute(ctx, "", []string{"sleep", "30"}, &sandboxd.ExecutionCreateRequest{
		Profile: "container", Limits: &sandboxd.LimitsRequest{TimeoutS: 1}}))
	check(ex.Status == "timeout" && ex.Reason == "timeout", ex)

	step("cancel a running execution")
	created := must(client.Sandbox.Executions.Create(ctx, &sandboxd.ExecutionCreateRequest{
		Profile: "container", Command: []string{"sleep", "60"}}))
	must(client.Sandbox.Executions.Cancel(ctx, created.ID))
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	ex = must(client.Sandbox.Executions.Wait(wctx, created.ID, nil))
	cancel()
	check(ex.Status == "killed" && ex.Reason == "cancelled", ex)

	step("a session: exec, files, archives, patch")
	s := must(client.Sandbox.Sessions.Create(ctx, &sandboxd.SessionCreateRequest{Profile: "container",
		Metadata: map[string]string{"agent": "sdk"}}))
	sid := s.ID()
	session(ctx, client, s)
	ok(s.Delete(ctx))
	check(must(client.Sandbox.Sessions.Get(ctx, sid)).Status() == "terminated", "deleted")

	step("a 429 retried, honouring Retry-After")
	var retries []sandboxd.RetryInfo
	ratey := must(sandboxd.NewClient(sandboxd.WithAPIKey(os.Getenv("SBX_RATE_KEY")),
		sandboxd.WithOnRetry(func(i sandboxd.RetryInfo) { retries = append(retries, i) })))
	for i := 0; i < 4; i++ {
		must(ratey.Profiles(ctx))
	}
	check(len(retries) > 0, "never retried")
	for _, r := range retries {
		check(r.RetryAfter > 0 && r.Delay >= r.RetryAfter, r)
	}
	noRetry := must(ratey.With(sandboxd.WithMaxRetries(0), sandboxd.WithOnRetry(nil)))
	var err error
	for i := 0; i < 4 && err == nil; i++ {
		_, err = noRetry.Profiles(ctx)
	}
	var ae *sandboxd.APIError
	check(errors.Is(err, sandboxd.ErrRateLimited) && errors.As(err, &ae) && ae.Status == 429 &&
		ae.RetryAfter > 0 && ae.Limit() == "requests_per_second", err)

	step("a French error")
	fr := must(client.With(sandboxd.WithLanguage("fr")))
	_, err = fr.Sandbox.Sessions.Get(ctx, "ses_000000000000000000000000")
	check(errors.Is(err, sandboxd.ErrNotFound) && errors.As(err, &ae), err)
	check(ae.Code == "not_found" && ae.Message == ae.MessageI18n["fr"] &&
		ae.MessageI18n["fr"] != ae.MessageI18n["en"] && strings.HasPrefix(ae.RequestID, "req_"), ae)
	_, err = fr.Sandbox.Sessions.Create(ctx, &sandboxd.SessionCreateRequest{Profile: "container",
		Limits: &sandboxd.LimitsRequest{Memory: "lots"}})
	check(errors.Is(err, sandboxd.ErrInvalidRequest) && errors.As(err, &ae), err)
	check(ae.Field() == "limits.memory" && ae.Message == ae.MessageI18n["fr"], ae)

	step("profiles, usage, audit")
	pl := must(client.Profiles(ctx))
	check(pl.Get("container") != nil && pl.Get("container").Available, pl)
	u := must(client.Usage(ctx, &sandboxd.UsageOptions{GroupBy: "project"}))
	found = false
	for _, g := range u.Groups {
		found = found || (g.Key == "sdk" && g.Records >= 1)
	}
	check(found, u)
	page := must(admin.Audit.List(ctx, &sandboxd.AuditListOptions{Limit: 5}))
	check(len(page.Events) > 0 && page.Events[0].Seq >= 1, page)
	check(must(admin.Audit.Verify(ctx)).OK, "audit chain")
	_, err = client.Audit.Verify(ctx)
	check(errors.Is(err, sandboxd.ErrForbidden), "a tenant key verified the audit chain:", err)

	tools(ctx, client)

	fmt.Println("[go] scenario passed")
}

// tools runs the contracts and tools steps.
func tools(ctx context.Context, client *sandboxd.Client) {
	step("contracts: a bad tool manifest's violations")
	check(strings.Contains(strings.Join(must(client.Contracts.List(ctx)), " "), "tool-manifest"), "contracts")
	var schema struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	ok(json.Unmarshal(must(client.Contracts.Get(ctx, "tool-manifest")), &schema))
	check(schema.Properties["kind"]["const"] == "Tool", schema)
	bad := sandboxd.ToolManifest{Metadata: sandboxd.ToolMetadata{Name: "Add_Numbers"},
		Spec: sandboxd.ToolSpec{SandboxProfile: "container", Command: []string{"python3"}}}
	badDoc := map[string]any{"apiVersion": "sandboxd/v1", "kind": "Tool",
		"metadata": map[string]string{"name": "Add_Numbers"},
		"spec":     map[string]any{"sandbox_profile": "container", "command": "python3"}}
	v := must(client.Contracts.Validate(ctx, "tool-manifest", badDoc))
	paths := map[string]bool{}
	for _, x := range v.Violations {
		paths[x.Path] = true
		check(x.Message != "" && x.MessageI18n["fr"] != "", x)
	}
	check(!v.Valid && paths["/metadata/name"] && paths["/spec/command"], v)

	step("tools: apply, apply again, list")
	const name = "add-numbers-go"
	m := sandboxd.ToolManifest{
		Metadata: sandboxd.ToolMetadata{Name: name, Description: "Adds a and b.",
			Labels: map[string]string{"sdk": "go"}},
		Spec: sandboxd.ToolSpec{SandboxProfile: "container", Image: "python:3.12-slim",
			Command: []string{"python3", "-c", "import json,sys; d=json.load(sys.stdin); print(d['a']+d['b'])"},
			InputSchema: map[string]any{"type": "object", "required": []string{"a", "b"},
				"properties": map[string]any{"a": map[string]string{"type": "number"},
					"b": map[string]string{"type": "number"}}}},
	}
	res := must(client.Tools.Apply(ctx, []sandboxd.ToolManifest{m}, &sandboxd.ApplyOptions{DryRun: true}))
	check(res.DryRun && res.Results[0].Action == "created", res)
	res = must(client.Tools.Apply(ctx, []sandboxd.ToolManifest{m}, nil))
	check(!res.DryRun && len(res.Results) == 1 && res.Results[0].Name == name &&
		res.Results[0].Action == "created" && res.Results[0].Tool.Generation == 1, res)
	res = must(client.Tools.Apply(ctx, []sandboxd.ToolManifest{m}, nil))
	check(res.Results[0].Action == "unchanged" && res.Results[0].Tool.Generation == 1, res)
	_, err := client.Tools.Apply(ctx, []sandboxd.ToolManifest{m, bad}, nil)
	var ae *sandboxd.APIError
	check(errors.Is(err, sandboxd.ErrInvalidRequest) && errors.As(err, &ae) && len(ae.Violations()) > 0, err)
	named := false
	for _, x := range ae.Violations() {
		check(x.Index != nil && *x.Index == 1, x)
		named = named || x.Path == "/metadata/name"
	}
	check(named, ae.Violations())
	var found *sandboxd.Tool
	ok(client.Tools.Each(ctx, nil, func(t *sandboxd.Tool) bool {
		if t.Name == name {
			found = t
		}
		return true
	}))
	check(found != nil && found.Profile == "container" &&
		fmt.Sprint(found.Manifest.Spec.InputSchema["required"]) == "[a b]" &&
		found.Manifest.Metadata.Description == "Adds a and b.", found)

	step("tools: run, a bad input, delete")
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	ex := must(client.Tools.Run(rctx, name, map[string]int{"a": 2, "b": 3}, nil))
	check(ex.Status == "succeeded" && intIs(ex.ExitCode, 0) && ex.Stdout == "5\n" && ex.Metadata["tool"] == name, ex)
	_, err = client.Tools.Invoke(ctx, name, map[string]string{"a": "x"}, nil)
	check(errors.Is(err, sandboxd.ErrInvalidRequest) && errors.As(err, &ae) && ae.Code == "invalid_request" &&
		len(ae.Violations()) > 0, err)
	for _, x := range ae.Violations() {
		check(strings.HasPrefix(x.Path, "/input"), x)
	}
	ok(client.Tools.Delete(ctx, name))
	_, err = client.Tools.Get(ctx, name)
	check(errors.Is(err, sandboxd.ErrNotFound), "a deleted tool is still there:", err)
}

// session runs the session steps on s (deleted by the caller).
func session(ctx context.Context, client *sandboxd.Client, s *sandboxd.SandboxSession) {
	check(s.Status() == "ready", s.Info)
	r := must(s.Exec(ctx, []string{"sh", "-c", "echo out; echo err >&2; exit 4"}, nil))
	check(r.Status == "failed" && intIs(r.ExitCode, 4) && r.Stdout == "out\n" && r.Stderr == "err\n", r)
	must(s.Files.Put(ctx, "/work/a/hello.txt", []byte("hi there")))
	check(string(must(s.Files.Get(ctx, "/work/a/hello.txt"))) == "hi there", "get")
	ents := must(s.Files.List(ctx, "/work/a", nil))
	check(len(ents) == 1 && ents[0].Name == "hello.txt", ents)
	check(must(s.Files.Stat(ctx, "/work/a/hello.txt")).Size == 8, "stat")
	names := []string{}
	tr := tar.NewReader(bytes.NewReader(must(s.Files.Archive(ctx, "/work/a", nil))))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		ok(err)
		names = append(names, h.Name)
	}
	check(strings.Contains(strings.Join(names, " "), "hello.txt"), names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	data := []byte("from a tar\n")
	ok(tw.WriteHeader(&tar.Header{Name: "x/y.txt", Mode: 0o644, Size: int64(len(data))}))
	must(tw.Write(data))
	ok(tw.Close())
	check(must(s.Files.Extract(ctx, "/work/b", buf.Bytes(), nil)).Entries >= 1, "extract")
	check(must(s.Files.ReadText(ctx, "/work/b/x/y.txt")) == "from a tar\n", "extracted")
	ok(s.Files.Delete(ctx, "/work/a/hello.txt"))
	_, err := s.Files.Get(ctx, "/work/a/hello.txt")
	check(errors.Is(err, sandboxd.ErrNotFound), "deleted file still readable:", err)
	ok(s.Update(ctx, &sandboxd.SessionPatchRequest{Metadata: map[string]string{"agent": "sdk", "step": "2"}}))
	check(reflect.DeepEqual(s.Info.Metadata, map[string]string{"agent": "sdk", "step": "2"}), s.Info)
	listed := false
	ok(client.Sandbox.Sessions.Each(ctx, nil, func(x *sandboxd.Session) bool {
		listed = x.ID == s.ID()
		return !listed
	}))
	check(listed, "session not listed")

	step("streaming exec")
	st := must(s.Stream(ctx, []string{"sh", "-c", "echo one; echo two >&2; echo three"}, nil))
	var out strings.Builder
	var last sandboxd.StreamEvent
	for st.Next() {
		last = st.Event()
		if last.Event == "stdout" {
			out.WriteString(last.Text)
		}
	}
	ok(st.Err())
	check(out.String() == "one\nthree\n" && last.Event == "exit" && intIs(last.Result.ExitCode, 0), out.String())
	var errOut strings.Builder
	res := must(s.ExecStream(ctx, []string{"sh", "-c", "echo e >&2; exit 2"}, nil, func(ev sandboxd.StreamEvent) error {
		if ev.Event == "stderr" {
			errOut.WriteString(ev.Text)
		}
		return nil
	}))
	check(intIs(res.ExitCode, 2) && errOut.String() == "e\n", res, errOut.String())

	step("a background process: stdin, follow, signal")
	p := must(s.Start(ctx, []string{"sh", "-c", "read x; echo got:$x; exit 3"}, nil))
	must(p.Stdin(ctx, []byte("hi\n"), true))
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	res = must(p.Wait(wctx))
	check(intIs(res.ExitCode, 3) && res.Status == "failed", res)
	check(must(p.Output(ctx, nil)).Stdout == "got:hi\n", "output")
	q := must(s.Start(ctx, []string{"sleep", "60"}, nil))
	running := false
	for _, x := range must(s.Processes.List(ctx)) {
		running = running || (x.PID == q.PID && x.Status == "running")
	}
	check(running, "not running")
	must(q.Signal(ctx, "TERM"))
	check(intIs(must(q.Wait(wctx)).Signal, 15), "signalled")

	step("a context keeps its state")
	cx := must(s.Contexts.Create(ctx, "python"))
	must(cx.Run(ctx, "x = 41", 0))
	rr := must(cx.Run(ctx, "x + 1", 0))
	check(rr.Status == "succeeded" && rr.Result != nil && *rr.Result == "42", rr)
	ok(cx.Delete(ctx))

	step("watch a directory")
	must(s.Files.Mkdir(ctx, "/work/w", nil))
	w := must(s.Watch(ctx, "/work/w", false))
	check(w.Next() && w.Event().Event == "ready", w.Err())
	must(s.Files.Put(ctx, "/work/w/new.txt", []byte("x")))
	check(w.Next(), w.Err())
	ev := w.Event()
	check((ev.Type == "create" || ev.Type == "modify") && strings.HasSuffix(ev.Path, "new.txt"), ev)
	ok(w.Close())

	step("traceparent reaches the workload")
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r = must(s.Exec(sandboxd.ContextWithTraceparent(ctx, tp), []string{"sh", "-c", "echo $TRACEPARENT"}, nil))
	check(strings.HasPrefix(r.Stdout, "00-4bf92f3577b34da6a3ce929d0e0e4736-"), r.Stdout)

	step("a client-side timeout (the context's deadline)")
	tctx, tcancel := context.WithTimeout(ctx, time.Second)
	defer tcancel()
	t0 := time.Now()
	_, err = client.Sandbox.Sessions.Session(s.ID()).Exec(tctx, []string{"sleep", "5"}, nil)
	var te *sandboxd.TransportError
	check(errors.Is(err, context.DeadlineExceeded) && errors.As(err, &te) && te.Timeout() &&
		time.Since(t0) < 4*time.Second, "no timeout:", err)
}
