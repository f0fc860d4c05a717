package sandboxd

import (
	"context"
	"errors"
	"net/http"
	"os"
	"time"
)

// Client is a sandboxd client; safe for concurrent use.  Its resources:
// Sandbox (Execute, Executions, Sessions, Profiles), Images, Contracts,
// Tools, Audit.
type Client struct {
	Sandbox   *SandboxService
	Images    *ImagesService
	Contracts *ContractsService
	Tools     *ToolsService
	Audit     *AuditService
	t         *transport
}

// NewClient makes a client.  The base URL and API key default to
// SANDBOXD_URL and SANDBOXD_API_KEY, then DefaultURL and no key.
func NewClient(opts ...Option) (*Client, error) {
	cfg := config{
		baseURL:       os.Getenv("SANDBOXD_URL"),
		apiKey:        os.Getenv("SANDBOXD_API_KEY"),
		timeout:       60 * time.Second,
		maxRetries:    4,
		backoff:       250 * time.Millisecond,
		maxBackoff:    8 * time.Second,
		maxRetryAfter: 60 * time.Second,
		userAgent:     "sandboxd-go/" + Version,
	}
	if cfg.baseURL == "" {
		cfg.baseURL = DefaultURL
	}
	return newClient(cfg, opts)
}

func newClient(cfg config, opts []Option) (*Client, error) {
	for _, o := range opts {
		o(&cfg)
	}
	t, err := newTransport(cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{t: t, Images: &ImagesService{t}, Audit: &AuditService{t},
		Contracts: &ContractsService{t}, Tools: &ToolsService{t}}
	c.Sandbox = &SandboxService{t: t, Executions: &ExecutionsService{t}, Sessions: &SessionsService{t}}
	return c, nil
}

// With is a copy of the client with some options changed:
// c.With(sandboxd.WithLanguage("fr")), c.With(sandboxd.WithMaxRetries(0)).
func (c *Client) With(opts ...Option) (*Client, error) {
	return newClient(c.t.cfg, opts)
}

// BaseURL is the daemon's URL this client talks to.
func (c *Client) BaseURL() string { return c.t.base }

// Healthz is GET /healthz (the daemon is up).
func (c *Client) Healthz(ctx context.Context) (*Health, error) {
	var h Health
	return &h, c.t.json(ctx, &call{op: "healthz"}, &h)
}

// Readyz is the readiness report: a 503 "not ready" report is returned,
// not an error.
func (c *Client) Readyz(ctx context.Context) (*Readiness, error) {
	var r Readiness
	err := c.t.json(ctx, &call{op: "readyz"}, &r)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable {
		var r2 Readiness
		if jsonObject(ae.Body, &r2) && r2.Checks != nil {
			return &r2, nil
		}
	}
	return &r, err
}

// Profiles lists the sandbox profiles (the same as c.Sandbox.Profiles).
func (c *Client) Profiles(ctx context.Context) (*ProfileList, error) {
	return c.Sandbox.Profiles(ctx)
}

// UsageOptions select a usage report: GroupBy "profile" (default),
// "project" or "agent" (metadata labels), From / To as RFC 3339 times or
// Unix seconds.
type UsageOptions struct {
	GroupBy string
	From    string
	To      string
}

// Usage is the tenant's resource usage (GET /v1/sandbox/usage).
func (c *Client) Usage(ctx context.Context, o *UsageOptions) (*UsageReport, error) {
	if o == nil {
		o = &UsageOptions{}
	}
	q := query{}.str("group_by", o.GroupBy).str("from", o.From).str("to", o.To)
	var u UsageReport
	return &u, c.t.json(ctx, &call{op: "getUsage", query: q}, &u)
}

// SandboxService runs code: Execute, Executions, Sessions, Profiles.
type SandboxService struct {
	Executions *ExecutionsService
	Sessions   *SessionsService
	t          *transport
}

// Profiles lists the sandbox profiles.
func (s *SandboxService) Profiles(ctx context.Context) (*ProfileList, error) {
	var p ProfileList
	return &p, s.t.json(ctx, &call{op: "listProfiles"}, &p)
}

// Execute creates an execution and waits for its final state (the seed's
// sandbox.execute): image and command override those of req (which may be
// nil); an empty image is the profile's.  A non-zero exit, a timeout or an
// OOM kill is a result, not an error.  ctx bounds the whole wait; without
// a deadline, one of limits.timeout_s + 6 min is set when the request has
// limits.timeout_s.
//
//	ex, err := c.Sandbox.Execute(ctx, "python:3.12-slim",
//		[]string{"python", "-c", "print(1)"}, &sandboxd.ExecutionCreateRequest{Profile: "gvisor"})
func (s *SandboxService) Execute(ctx context.Context, image string, command []string,
	req *ExecutionCreateRequest) (*Execution, error) {
	r := ExecutionCreateRequest{}
	if req != nil {
		r = *req
	}
	if image != "" {
		r.Image = image
	}
	if command != nil {
		r.Command = command
	}
	created, err := s.Executions.Create(ctx, &r)
	if err != nil {
		return nil, err
	}
	if _, has := ctx.Deadline(); !has && r.Limits != nil && r.Limits.TimeoutS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(r.Limits.TimeoutS+360)*time.Second)
		defer cancel()
	}
	return s.Executions.Wait(ctx, created.ID, nil)
}
