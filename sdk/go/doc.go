// Package sandboxd is the Go client of sandboxd, a daemon that runs
// untrusted code in sandboxes (docs/api/openapi.yaml describes its HTTP
// API; docs/sdk/go.md this package).  Standard library only.
//
//	c, err := sandboxd.NewClient() // SANDBOXD_URL, SANDBOXD_API_KEY
//	if err != nil { … }
//	ex, err := c.Sandbox.Execute(ctx, "python:3.12-slim",
//		[]string{"python", "-c", "print(1)"}, &sandboxd.ExecutionCreateRequest{Profile: "gvisor"})
//	fmt.Println(ex.Status, *ex.ExitCode, ex.Stdout) // succeeded 0 1
//
// Every call takes a context: its deadline and cancellation bound the call
// (including retries and their sleeps), and ContextWithTraceparent makes
// the call join the caller's W3C trace.  Error answers are *APIError
// (errors.Is(err, ErrNotFound), …); calls that got no answer fail with
// *TransportError, which unwraps to context.DeadlineExceeded on a timeout.
// Refusals that waiting cures (429 rate_limited, 503) are retried with
// backoff, honouring Retry-After.
package sandboxd
