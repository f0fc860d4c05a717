// Command sdkloop is the Go SDK's overhead (bench/sdkbench.py): like
// bench/sdkloop.py, through the sandboxd package (sdk/go) or as the same
// requests written by hand with net/http (one http.Client, keep-alive);
// one duration per line in µs.  Built by sdkbench.py with tests/sdk/go.sh.
//
// Usage: sdkloop URL KEY PROFILE {exec|execute} {sdk|raw} N W
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	sandboxd "github.com/sandboxd/sandboxd/sdk/go"
)

type ops struct{ exec, execute, done func() error }

func rawOps(url, key, profile string) (*ops, error) {
	hc := &http.Client{}
	call := func(method, path string, body any, out any) error {
		var b []byte // none: http.NoBody
		if body != nil {
			var err error
			if b, err = json.Marshal(body); err != nil {
				return err
			}
		}
		req, err := http.NewRequest(method, url+path, bytes.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		r, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer r.Body.Close()
		var buf bytes.Buffer // read to the end: the connection is reused
		if _, err := buf.ReadFrom(r.Body); err != nil {
			return err
		}
		data := buf.Bytes()
		if r.StatusCode >= 300 {
			return fmt.Errorf("%s %s: %d %.200s", method, path, r.StatusCode, data)
		}
		if out == nil || len(data) == 0 {
			return nil
		}
		return json.Unmarshal(data, out)
	}
	var s struct{ ID string }
	if err := call("POST", "/v1/sandbox/sessions", map[string]any{"profile": profile}, &s); err != nil {
		return nil, err
	}
	cmd := []string{"true"}
	return &ops{
		exec: func() error {
			var res map[string]any
			return call("POST", "/v1/sandbox/sessions/"+s.ID+"/exec",
				map[string]any{"command": cmd}, &res)
		},
		execute: func() error {
			var ex struct{ ID, Status string }
			err := call("POST", "/v1/sandbox/executions",
				map[string]any{"profile": profile, "command": cmd}, &ex)
			for err == nil && (ex.Status == "" || ex.Status == "queued" || ex.Status == "running") {
				err = call("GET", "/v1/sandbox/executions/"+ex.ID+"?wait_s=30", nil, &ex)
			}
			return err
		},
		done: func() error { return call("DELETE", "/v1/sandbox/sessions/"+s.ID, nil, nil) },
	}, nil
}

func sdkOps(url, key, profile string) (*ops, error) {
	ctx := context.Background()
	c, err := sandboxd.NewClient(sandboxd.WithBaseURL(url), sandboxd.WithAPIKey(key))
	if err != nil {
		return nil, err
	}
	s, err := c.Sandbox.Sessions.Create(ctx, &sandboxd.SessionCreateRequest{Profile: profile})
	if err != nil {
		return nil, err
	}
	cmd := []string{"true"}
	return &ops{
		exec: func() error { _, err := s.Exec(ctx, cmd, nil); return err },
		execute: func() error {
			_, err := c.Sandbox.Execute(ctx, "", cmd,
				&sandboxd.ExecutionCreateRequest{Profile: profile})
			return err
		},
		done: func() error { return s.Delete(ctx) },
	}, nil
}

func main() {
	if len(os.Args) != 8 {
		fmt.Fprintln(os.Stderr, "usage: sdkloop URL KEY PROFILE {exec|execute} {sdk|raw} N W")
		os.Exit(2)
	}
	url, key, profile, what, how := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5]
	n, _ := strconv.Atoi(os.Args[6])
	w, _ := strconv.Atoi(os.Args[7])
	mk := rawOps
	if how == "sdk" {
		mk = sdkOps
	}
	o, err := mk(url, key, profile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sdkloop:", err)
		os.Exit(1)
	}
	fn := o.execute
	if what == "exec" {
		fn = o.exec
	}
	out := make([]string, 0, n)
	for i := 0; i < w+n; i++ {
		t0 := time.Now()
		if err := fn(); err != nil {
			fmt.Fprintln(os.Stderr, "sdkloop:", err)
			os.Exit(1)
		}
		if i >= w {
			out = append(out, fmt.Sprintf("%.1f", float64(time.Since(t0).Nanoseconds())/1000))
		}
	}
	if err := o.done(); err != nil {
		fmt.Fprintln(os.Stderr, "sdkloop:", err)
		os.Exit(1)
	}
	fmt.Println(strings.Join(out, "\n"))
}
