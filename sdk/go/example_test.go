package sandboxd_test

// Examples: compiled by go test and go vet (they have no Output comment,
// so they are not run), so the usage docs/sdk/go.md shows stays valid.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	sandboxd "github.com/sandboxd/sandboxd/sdk/go"
)

func Example() {
	ctx := context.Background()
	c, err := sandboxd.NewClient(sandboxd.WithBaseURL("http://127.0.0.1:8080"),
		sandboxd.WithAPIKey(os.Getenv("SANDBOXD_API_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	ex, err := c.Sandbox.Execute(ctx, "python:3.12-slim", []string{"python", "-c", "print(1)"},
		&sandboxd.ExecutionCreateRequest{Profile: "gvisor"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ex.Status, *ex.ExitCode, ex.Stdout) // succeeded 0 1
}

func ExampleSandboxService_Execute() {
	ctx := context.Background()
	c, _ := sandboxd.NewClient()
	ex, err := c.Sandbox.Execute(ctx, "", nil, &sandboxd.ExecutionCreateRequest{
		Profile: "container", Language: "python", Code: "open('/work/out/r.json','w').write('{}')",
		Files: []sandboxd.InputFile{
			sandboxd.TextFile("/work/in/data.csv", "a,b\n1,2\n"),
			sandboxd.BinaryFile("/work/in/blob", []byte{0, 1}), // base64 when not UTF-8
		},
		Collect:  []string{"/work/out/*"},
		Limits:   &sandboxd.LimitsRequest{CPU: "500m", Memory: "256Mi", TimeoutS: 30},
		Metadata: map[string]string{"project": "demo"},
	})
	if err != nil {
		log.Fatal(err)
	}
	data, _ := c.Sandbox.Executions.Download(ctx, ex.ID, ex.Files[0].Path)
	fmt.Println(string(data))
}

func ExampleExecutionsService() {
	ctx := context.Background()
	c, _ := sandboxd.NewClient()
	created, _ := c.Sandbox.Executions.Create(ctx, &sandboxd.ExecutionCreateRequest{
		Command: []string{"sleep", "60"}})
	c.Sandbox.Executions.Get(ctx, created.ID, 5*time.Second) // long-poll up to 5 s
	c.Sandbox.Executions.Cancel(ctx, created.ID)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	final, _ := c.Sandbox.Executions.Wait(wctx, created.ID, nil)
	fmt.Println(final.Status, final.Reason) // killed cancelled
	page, _ := c.Sandbox.Executions.List(ctx, &sandboxd.ListOptions{Status: "succeeded", Limit: 50})
	fmt.Println(len(page.Executions), page.NextCursor)
	c.Sandbox.Executions.Each(ctx, nil, func(e *sandboxd.Execution) bool {
		fmt.Println(e.ID, e.Status)
		return true // false stops
	})
}

func ExampleSandboxSession() {
	ctx := context.Background()
	c, _ := sandboxd.NewClient()
	s, err := c.Sandbox.Sessions.Create(ctx, &sandboxd.SessionCreateRequest{Profile: "container",
		Env: map[string]string{"PROJECT": "demo"}, TTLS: 900})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Delete(ctx)

	r, _ := s.Exec(ctx, []string{"sh", "-c", "echo hi; exit 3"}, nil) // Status failed, ExitCode 3
	fmt.Println(r.Status, *r.ExitCode, r.Stdout)
	s.Exec(ctx, nil, &sandboxd.ExecRequest{Language: "python", Code: "print(2+2)", TimeoutS: 10})

	// streaming: an iterator…
	st, _ := s.Stream(ctx, []string{"sh", "-c", "for i in 1 2 3; do echo $i; sleep 1; done"}, nil)
	for st.Next() {
		ev := st.Event()
		switch ev.Event {
		case "stdout", "stderr":
			fmt.Print(ev.Text)
		case "exit":
			fmt.Println("exit code", *ev.Result.ExitCode)
		}
	}
	if err := st.Err(); err != nil {
		log.Fatal(err)
	}
	// …or a callback
	res, _ := s.ExecStream(ctx, []string{"make"}, nil, func(ev sandboxd.StreamEvent) error {
		os.Stdout.Write(ev.Bytes)
		return nil
	})
	fmt.Println(res.Status)

	s.Files.Put(ctx, "/work/a.txt", []byte("data"))
	text, _ := s.Files.ReadText(ctx, "/work/a.txt") // Get → []byte
	entries, _ := s.Files.List(ctx, "/work", &sandboxd.DirOptions{Recursive: true})
	st2, _ := s.Files.Stat(ctx, "/work/a.txt")
	s.Files.Mkdir(ctx, "/work/d", &sandboxd.MkdirOptions{Parents: true})
	s.Files.Move(ctx, "/work/a.txt", "/work/d/a.txt", false)
	tar, _ := s.Files.Archive(ctx, "/work", nil) // a tar
	s.Files.Extract(ctx, "/work/src", tar, nil)
	s.Files.Delete(ctx, "/work/d")
	fmt.Println(text, len(entries), st2.Size)

	s.Update(ctx, &sandboxd.SessionPatchRequest{Metadata: map[string]string{"step": "2"}, TTLS: 3600})
	w, _ := s.Watch(ctx, "/work", true)
	for w.Next() {
		fmt.Println(w.Event().Type, w.Event().Path)
		break
	}
	w.Close()
}

func ExampleBackgroundProcess() {
	ctx := context.Background()
	c, _ := sandboxd.NewClient()
	s := c.Sandbox.Sessions.Session("ses_…")
	p, _ := s.Start(ctx, []string{"sh", "-c", "read x; echo got:$x"}, nil)
	p.Stdin(ctx, []byte("hi\n"), true)
	f, _ := p.Follow(ctx, nil) // replay, live, exit
	f.Each(func(ev sandboxd.StreamEvent) error { fmt.Println(ev.Event, ev.Text); return nil })
	out, _ := p.Output(ctx, &sandboxd.OutputOptions{StdoutOffset: 0})
	fmt.Print(out.Stdout)
	p.Signal(ctx, "TERM")
	res, _ := p.Wait(ctx)
	fmt.Println(res.Status)
	t, _ := s.Start(ctx, []string{"bash"}, &sandboxd.ExecRequest{Pty: &sandboxd.PtySize{Cols: 120, Rows: 40}})
	t.Resize(ctx, 100, 30)
	procs, _ := s.Processes.List(ctx)
	fmt.Println(len(procs))
}

func ExampleContextHandle() {
	ctx := context.Background()
	c, _ := sandboxd.NewClient()
	s := c.Sandbox.Sessions.Session("ses_…")
	cx, _ := s.Contexts.Create(ctx, "python")
	cx.Run(ctx, "x = 41", 0)
	r, _ := cx.Run(ctx, "x + 1", 0)
	fmt.Println(*r.Result) // 42
	cx.Restart(ctx)
	cx.Delete(ctx)
}

func ExampleClient_admin() {
	ctx := context.Background()
	c, _ := sandboxd.NewClient()
	pl, _ := c.Profiles(ctx)
	if p := pl.Get("gvisor"); p != nil {
		fmt.Println(p.Available)
	}
	imgs, _ := c.Images.List(ctx)
	fmt.Println(len(imgs))
	admin, _ := sandboxd.NewClient(sandboxd.WithAPIKey(os.Getenv("ADMIN_KEY")))
	admin.Images.Pull(ctx, "127.0.0.1:5000/tools/jq:1", func(p sandboxd.PullProgress) {
		fmt.Println(p.Blob, p.Done, p.Total)
	})
	admin.Images.Delete(ctx, "127.0.0.1:5000/tools/jq:1")
	admin.Images.GC(ctx)
	u, _ := c.Usage(ctx, &sandboxd.UsageOptions{GroupBy: "project", From: "2026-01-01T00:00:00Z"})
	fmt.Println(u.Total.CPUSeconds)
	page, _ := admin.Audit.List(ctx, &sandboxd.AuditListOptions{Action: "sandbox.execute", Limit: 100})
	fmt.Println(len(page.Events), page.NextCursor)
	v, _ := admin.Audit.Verify(ctx)
	fmt.Println(v.OK)
}

func ExampleAPIError() {
	ctx := context.Background()
	c, _ := sandboxd.NewClient()
	fr, _ := c.With(sandboxd.WithLanguage("fr"))
	_, err := fr.Sandbox.Sessions.Get(ctx, "ses_000000000000000000000000")
	var ae *sandboxd.APIError
	if errors.Is(err, sandboxd.ErrNotFound) && errors.As(err, &ae) {
		fmt.Println(ae.Message, ae.RequestID) // "Introuvable…", req_…
	}
	_, err = c.Sandbox.Sessions.Create(ctx, &sandboxd.SessionCreateRequest{
		Limits: &sandboxd.LimitsRequest{Memory: "lots"}})
	if errors.As(err, &ae) && ae.Code == "invalid_request" {
		fmt.Println(ae.Field()) // limits.memory
	}
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = c.Sandbox.Sessions.Session("ses_…").Exec(tctx, []string{"sleep", "5"}, nil)
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Println("timed out:", err)
	}
}

func ExampleWithOnRetry() {
	c, _ := sandboxd.NewClient(
		sandboxd.WithMaxRetries(6),
		sandboxd.WithBackoff(100*time.Millisecond, 5*time.Second),
		sandboxd.WithOnRetry(func(i sandboxd.RetryInfo) {
			log.Printf("%s: retry %d in %v (%s)", i.Operation, i.Attempt, i.Delay, i.Why)
		}))
	_ = c
}

func ExampleContextWithTraceparent() {
	c, _ := sandboxd.NewClient()
	ctx := sandboxd.ContextWithTraceparent(context.Background(),
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	r, _ := c.Sandbox.Sessions.Session("ses_…").Exec(ctx, []string{"sh", "-c", "echo $TRACEPARENT"}, nil)
	fmt.Print(r.Stdout) // 00-4bf92f3577b34da6a3ce929d0e0e4736-…
}

func ExampleContractsService() {
	ctx := context.Background()
	c, _ := sandboxd.NewClient()
	names, _ := c.Contracts.List(ctx) // [tool-manifest]
	schema, _ := c.Contracts.Get(ctx, "tool-manifest")
	fmt.Println(names, len(schema))
	v, _ := c.Contracts.Validate(ctx, "tool-manifest", map[string]any{
		"apiVersion": "sandboxd/v1", "kind": "Tool", "metadata": map[string]string{"name": "Add_Numbers"},
		"spec": map[string]any{"sandbox_profile": "container", "command": "python3"}})
	for _, x := range v.Violations {
		fmt.Println(x.Path, x.Message) // /metadata/name …, /spec …, /spec/command …
	}
}

func ExampleToolsService() {
	ctx := context.Background()
	c, _ := sandboxd.NewClient()
	m := sandboxd.ToolManifest{ // APIVersion and Kind are filled in
		Metadata: sandboxd.ToolMetadata{Name: "add-numbers"},
		Spec: sandboxd.ToolSpec{
			SandboxProfile: "container", Image: "python:3.12-slim",
			Command: []string{"python3", "-c", "import json,sys; d=json.load(sys.stdin); print(d['a']+d['b'])"},
			InputSchema: map[string]any{"type": "object", "required": []string{"a", "b"},
				"properties": map[string]any{"a": map[string]string{"type": "number"},
					"b": map[string]string{"type": "number"}}},
			Limits: &sandboxd.LimitsRequest{TimeoutS: 30},
		},
	}
	res, err := c.Tools.Apply(ctx, []sandboxd.ToolManifest{m}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Results[0].Action, res.Results[0].Tool.Generation) // created 1 (then unchanged 1)

	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	ex, err := c.Tools.Run(wctx, "add-numbers", map[string]int{"a": 2, "b": 3}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(ex.Stdout) // 5

	_, err = c.Tools.Invoke(ctx, "add-numbers", map[string]string{"a": "x"}, nil)
	var ae *sandboxd.APIError
	if errors.Is(err, sandboxd.ErrInvalidRequest) && errors.As(err, &ae) {
		for _, v := range ae.Violations() {
			fmt.Println(v.Path, v.Message) // /input/a …, /input …
		}
	}
	c.Tools.Each(ctx, nil, func(t *sandboxd.Tool) bool {
		fmt.Println(t.Name, t.Profile, t.Generation)
		return true
	})
	c.Tools.Delete(ctx, "add-numbers")
	if _, err := c.Tools.Get(ctx, "add-numbers"); errors.Is(err, sandboxd.ErrNotFound) {
		fmt.Println("gone")
	}
}
