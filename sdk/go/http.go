package sandboxd

// The transport: one HTTP request per call over net/http, the API key,
// Accept-Language, traceparent and X-Request-Id headers, JSON in and out,
// error envelopes turned into *APIError, bounded retries with exponential
// backoff and jitter on 429/503 (honouring Retry-After), timeouts through
// contexts, and Server-Sent Events read as a stream.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Version is this SDK's version (sent in User-Agent).
const Version = "0.1.0"

// DefaultURL is the daemon's address when neither WithBaseURL nor
// SANDBOXD_URL gives one.
const DefaultURL = "http://127.0.0.1:8080"

var idempotent = map[string]bool{"GET": true, "HEAD": true, "PUT": true, "DELETE": true,
	"OPTIONS": true}

// RetryInfo describes a retry, given to the WithOnRetry callback before
// its sleep.
type RetryInfo struct {
	Operation  string        // the operationId
	Attempt    int           // 1 for the first retry
	Delay      time.Duration // the sleep before it
	Why        string        // "HTTP 429", "timeout", "transport: …"
	RetryAfter time.Duration // the answer's Retry-After; 0 when it had none
	RequestID  string        // the refused request's X-Request-Id
}

type config struct {
	baseURL       string
	apiKey        string
	language      string
	timeout       time.Duration // <= 0: none
	maxRetries    int
	backoff       time.Duration
	maxBackoff    time.Duration
	maxRetryAfter time.Duration
	traceparent   func(context.Context) string
	onRetry       func(RetryInfo)
	httpClient    *http.Client
	headers       http.Header
	userAgent     string
}

// Option configures a Client (NewClient, Client.With).
type Option func(*config)

// WithBaseURL sets the daemon's URL (default: SANDBOXD_URL, else DefaultURL).
func WithBaseURL(u string) Option { return func(c *config) { c.baseURL = u } }

// WithAPIKey sets the API key (default: SANDBOXD_API_KEY).
func WithAPIKey(k string) Option { return func(c *config) { c.apiKey = k } }

// WithLanguage sets the Accept-Language of error messages ("en", "fr").
func WithLanguage(lang string) Option { return func(c *config) { c.language = lang } }

// WithTimeout sets the per-request timeout (default 60 s; 0 for none).
// Calls that last longer by nature (an exec, a wait) stretch it to their
// own bound; streams have none.  The caller's context bounds every call
// on top of it.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithMaxRetries sets how many times a refused (429/503) or unanswered
// request is retried (default 4; 0 for never).
func WithMaxRetries(n int) Option { return func(c *config) { c.maxRetries = n } }

// WithBackoff sets the first backoff step (default 250 ms), doubled per
// attempt up to max (default 8 s), with jitter.
func WithBackoff(first, max time.Duration) Option {
	return func(c *config) { c.backoff, c.maxBackoff = first, max }
}

// WithMaxRetryAfter caps the Retry-After honoured (default 60 s).
func WithMaxRetryAfter(d time.Duration) Option { return func(c *config) { c.maxRetryAfter = d } }

// WithTraceparentFunc gives the W3C traceparent of a call's context when
// ContextWithTraceparent did not set one (a bridge to a tracing library).
func WithTraceparentFunc(f func(context.Context) string) Option {
	return func(c *config) { c.traceparent = f }
}

// WithOnRetry calls f before each retry's sleep (nil: none).
func WithOnRetry(f func(RetryInfo)) Option { return func(c *config) { c.onRetry = f } }

// WithHTTPClient sets the *http.Client requests go through (TLS settings,
// proxies, a test transport).  Its Timeout should be 0: contexts bound calls.
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.httpClient = hc } }

// WithHeader adds a header to every request.
func WithHeader(name, value string) Option {
	return func(c *config) {
		h := c.headers.Clone()
		if h == nil {
			h = http.Header{}
		}
		h.Add(name, value)
		c.headers = h
	}
}

// WithUserAgent replaces the User-Agent (default sandboxd-go/Version).
func WithUserAgent(ua string) Option { return func(c *config) { c.userAgent = ua } }

type ctxKey int

const (
	traceparentKey ctxKey = iota
	requestIDKey
)

// ContextWithTraceparent returns a context whose calls send this W3C
// traceparent, so the daemon's spans (and the sandboxed workload, which
// gets TRACEPARENT) join the caller's trace.  Without one the client
// asks WithTraceparentFunc, then uses the TRACEPARENT environment
// variable (set inside a sandbox).
func ContextWithTraceparent(ctx context.Context, traceparent string) context.Context {
	return context.WithValue(ctx, traceparentKey, traceparent)
}

// ContextWithRequestID returns a context whose calls send this
// X-Request-Id (1–39 of [A-Za-z0-9_-]); the daemon logs and answers with it.
func ContextWithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

type transport struct {
	cfg    config
	base   string // scheme://host[:port][/prefix], no trailing slash
	client *http.Client
	rngMu  sync.Mutex
	rng    *rand.Rand
}

func newTransport(cfg config) (*transport, error) {
	base := strings.TrimRight(cfg.baseURL, "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sandboxd: base URL must be http(s)://host[:port]: %q", cfg.baseURL)
	}
	hc := cfg.httpClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &transport{cfg: cfg, base: base, client: hc,
		rng: rand.New(rand.NewSource(time.Now().UnixNano()))}, nil
}

// call is one request, as the resources describe it.
type call struct {
	op          string
	params      map[string]string // path parameters; a name ending in * keeps its slashes
	query       query
	json        any
	body        []byte
	contentType string
	accept      string
	stream      bool
	expect      []int
	timeout     time.Duration // 0: the client's; < 0: none
}

const noTimeout = time.Duration(-1)

// atLeast is a timeout of at least d (the client's when longer), or none
// when the client has none.
func (t *transport) atLeast(d time.Duration) time.Duration {
	if t.cfg.timeout <= 0 {
		return noTimeout
	}
	if d > t.cfg.timeout {
		return d
	}
	return t.cfg.timeout
}

func (t *transport) url(c *call) (string, error) {
	r, ok := routes[c.op]
	if !ok {
		return "", fmt.Errorf("sandboxd: unknown operation %q", c.op)
	}
	p := r.path
	for k, v := range c.params {
		enc := url.PathEscape(v)
		if strings.HasSuffix(k, "*") {
			segs := strings.Split(v, "/")
			for i := range segs {
				segs[i] = url.PathEscape(segs[i])
			}
			enc = strings.Join(segs, "/")
		}
		p = strings.Replace(p, "{"+k+"}", enc, 1)
	}
	if strings.Contains(p, "{") {
		return "", fmt.Errorf("sandboxd: %s: missing path parameter in %s", c.op, p)
	}
	for k := range c.query {
		if !contains(queryParams[c.op], k) {
			return "", fmt.Errorf("sandboxd: %s: query parameter %q not in its route table", c.op, k)
		}
	}
	if len(c.query) > 0 {
		p += "?" + url.Values(c.query).Encode()
	}
	return t.base + p, nil
}

func contains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func (t *transport) traceparent(ctx context.Context) string {
	if tp, _ := ctx.Value(traceparentKey).(string); tp != "" {
		return tp
	}
	if t.cfg.traceparent != nil {
		if tp := t.cfg.traceparent(ctx); tp != "" {
			return tp
		}
	}
	return os.Getenv("TRACEPARENT") // inside a sandbox: the daemon's own context
}

func (t *transport) header(ctx context.Context, c *call) http.Header {
	h := t.cfg.headers.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("User-Agent", t.cfg.userAgent)
	h.Set("Accept", "application/json")
	if c.accept != "" {
		h.Set("Accept", c.accept)
	}
	if c.stream {
		h.Set("Accept", "text/event-stream")
	}
	if t.cfg.apiKey != "" {
		h.Set("Authorization", "Bearer "+t.cfg.apiKey)
	}
	if t.cfg.language != "" {
		h.Set("Accept-Language", t.cfg.language)
	}
	if tp := t.traceparent(ctx); tp != "" {
		h.Set("traceparent", tp)
	}
	if id, _ := ctx.Value(requestIDKey).(string); id != "" {
		h.Set("X-Request-Id", id)
	}
	return h
}

// retryAfter reads Retry-After: seconds, or an HTTP date.
func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil {
		if d := time.Until(at); d > 0 {
			return d
		}
	}
	return 0
}

// shouldRetry: 429 and 503 are answered before the daemon stores or runs
// anything ("nothing is stored for a refused request"), so retrying them
// cannot duplicate a creation.  Of the 429s, only those that waiting cures
// are retried: the rate limit and the full execution queue; a tenant quota
// (details.limit sessions / executions / cpu_seconds_per_day) is not.
func shouldRetry(status int, body []byte) bool {
	if status != 429 && status != 503 {
		return false
	}
	var env envelope
	if json.Unmarshal(body, &env) != nil || env.Error == nil {
		return status == 503
	}
	code := env.Error.Code
	if status == 503 {
		return code == "runtime_unavailable" || code == "not_ready"
	}
	if code == "rate_limited" {
		return true
	}
	_, hasLimit := env.Error.Details["limit"]
	return code == "quota_exceeded" && !hasLimit
}

// refusedBeforeSending: a failed dial sent nothing, so any method is safe
// to retry.
func refusedBeforeSending(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

func (t *transport) delay(attempt int, ra time.Duration) time.Duration {
	t.rngMu.Lock()
	defer t.rngMu.Unlock()
	if ra > 0 {
		if ra > t.cfg.maxRetryAfter {
			ra = t.cfg.maxRetryAfter
		}
		// a little jitter spreads a crowd of clients released by one refill
		return ra + time.Duration(t.rng.Int63n(int64(100*time.Millisecond)))
	}
	capd := t.cfg.backoff << uint(attempt)
	if capd > t.cfg.maxBackoff || capd <= 0 {
		capd = t.cfg.maxBackoff
	}
	if capd < 2 {
		return capd
	}
	return capd/2 + time.Duration(t.rng.Int63n(int64(capd/2))) // equal jitter
}

// backoff sleeps before a retry (or returns the context's error).
func (t *transport) backoff(ctx context.Context, op string, attempt int, why string,
	ra time.Duration, rid string) error {
	d := t.delay(attempt, ra)
	if t.cfg.onRetry != nil {
		t.cfg.onRetry(RetryInfo{Operation: op, Attempt: attempt + 1, Delay: d, Why: why,
			RetryAfter: ra, RequestID: rid})
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answer is a successful response: its whole body, or (for a stream) the
// open body, whose Close ends the request.
type answer struct {
	status int
	header http.Header
	body   []byte
	stream io.ReadCloser
	ctx    context.Context // the request's own (for telling a timeout)
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// send sends a request, retrying as described above; the answer when its
// status is < 400 (and among c.expect), else an error.
func (t *transport) send(ctx context.Context, c *call) (*answer, error) {
	u, err := t.url(c)
	if err != nil {
		return nil, err
	}
	method := routes[c.op].method
	terr := func(err error) error { return &TransportError{Op: c.op, Method: method, URL: u, Err: err} }
	var body []byte
	h := t.header(ctx, c)
	if c.json != nil {
		if body, err = json.Marshal(c.json); err != nil {
			return nil, fmt.Errorf("sandboxd: %s: %w", c.op, err)
		}
		h.Set("Content-Type", "application/json")
	} else if c.body != nil {
		body = c.body
		ct := c.contentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		h.Set("Content-Type", ct)
	}
	timeout := c.timeout
	if timeout == 0 {
		timeout = t.cfg.timeout
		if c.stream {
			timeout = noTimeout
		}
	}
	for attempt := 0; ; {
		if err := ctx.Err(); err != nil {
			return nil, terr(err)
		}
		var actx context.Context
		var cancel context.CancelFunc
		if timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, timeout)
		} else {
			actx, cancel = context.WithCancel(ctx)
		}
		var rd io.Reader
		if body != nil || method == "POST" || method == "PUT" || method == "PATCH" {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(actx, method, u, rd)
		if err != nil {
			cancel()
			return nil, terr(err)
		}
		req.Header = h.Clone()
		resp, err := t.client.Do(req)
		if err != nil {
			timedOut := actx.Err() == context.DeadlineExceeded
			cancel()
			if ctx.Err() != nil {
				return nil, terr(ctx.Err())
			}
			if (refusedBeforeSending(err) || idempotent[method]) && attempt < t.cfg.maxRetries {
				why := "transport: " + err.Error()
				if timedOut {
					why = "timeout"
				}
				if err := t.backoff(ctx, c.op, attempt, why, 0, ""); err != nil {
					return nil, terr(err)
				}
				attempt++
				continue
			}
			if timedOut {
				return nil, terr(fmt.Errorf("no answer within %v: %w", timeout, context.DeadlineExceeded))
			}
			return nil, terr(err)
		}
		ok := resp.StatusCode < 400 && (len(c.expect) == 0 || contains(c.expect, resp.StatusCode))
		if ok && c.stream {
			return &answer{status: resp.StatusCode, header: resp.Header, ctx: actx,
				stream: &cancelOnClose{resp.Body, cancel}}, nil
		}
		// Buffer the body inside the timeout, so a stalled body is a timeout too.
		data, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		timedOut := actx.Err() == context.DeadlineExceeded
		cancel()
		if rerr != nil {
			if ctx.Err() != nil {
				return nil, terr(ctx.Err())
			}
			if timedOut {
				return nil, terr(fmt.Errorf("answer cut by the %v timeout: %w", timeout,
					context.DeadlineExceeded))
			}
			return nil, terr(rerr)
		}
		if ok {
			return &answer{status: resp.StatusCode, header: resp.Header, body: data}, nil
		}
		ra := retryAfter(resp.Header)
		rid := resp.Header.Get("X-Request-Id")
		if shouldRetry(resp.StatusCode, data) && attempt < t.cfg.maxRetries {
			if err := t.backoff(ctx, c.op, attempt, fmt.Sprintf("HTTP %d", resp.StatusCode),
				ra, rid); err != nil {
				return nil, terr(err)
			}
			attempt++
			continue
		}
		return nil, errorFromBody(resp.StatusCode, data, ra, rid)
	}
}

// json sends a request and decodes its JSON answer into out (nil: ignored).
func (t *transport) json(ctx context.Context, c *call, out any) error {
	a, err := t.send(ctx, c)
	if err != nil {
		return err
	}
	if out == nil || len(bytes.TrimSpace(a.body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return fmt.Errorf("sandboxd: %s: bad JSON answer: %w", c.op, err)
	}
	return nil
}

// bytes sends a request and returns its body.
func (t *transport) bytes(ctx context.Context, c *call) ([]byte, error) {
	a, err := t.send(ctx, c)
	if err != nil {
		return nil, err
	}
	return a.body, nil
}

// query builds url.Values, leaving zero values out.
type query url.Values

func (q query) str(k, v string) query {
	if v != "" {
		url.Values(q).Set(k, v)
	}
	return q
}

func (q query) flag(k string, b bool) query {
	if b {
		url.Values(q).Set(k, "true")
	}
	return q
}

func (q query) num(k string, n int64) query {
	if n != 0 {
		url.Values(q).Set(k, strconv.FormatInt(n, 10))
	}
	return q
}
