package sandboxd

// Unit tests against net/http/httptest servers that answer from a script:
// retries, errors, headers, paths, timeouts, streams.  The scenario
// against a real daemon is e2e/scenario (tests/sdk/test_sdk.py).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

type seen struct {
	Method, Path, RawPath, Query string
	Header                       http.Header
	Body                         []byte
}

// fake is a server answering each request with the next handler of its
// script (the last one repeats), recording what it was sent.
type fake struct {
	*httptest.Server
	mu     sync.Mutex
	script []http.HandlerFunc
	reqs   []seen
}

func newFake(t *testing.T, script ...http.HandlerFunc) *fake {
	f := &fake{script: script}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		i := len(f.reqs)
		f.reqs = append(f.reqs, seen{r.Method, r.URL.Path, r.URL.EscapedPath(), r.URL.RawQuery,
			r.Header.Clone(), b})
		h := f.script[len(f.script)-1]
		if i < len(f.script) {
			h = f.script[i]
		}
		f.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) seen() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

func (f *fake) client(t *testing.T, opts ...Option) *Client {
	t.Setenv("TRACEPARENT", "")
	all := append([]Option{WithBaseURL(f.URL), WithAPIKey("sbx_test"),
		WithBackoff(time.Millisecond, 4*time.Millisecond)}, opts...)
	c, err := NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func reply(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func errBody(code, msg string, details string) string {
	if details == "" {
		details = "{}"
	}
	return fmt.Sprintf(`{"error":{"code":%q,"message":%q,"message_i18n":{"en":%q,"fr":"fr: %s"},`+
		`"request_id":"req_1","details":%s}}`, code, msg, msg, msg, details)
}

// hangup drops the connection without an answer.
func hangup(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

const profilesJSON = `{"profiles":[{"name":"container","available":true}],"default":"container"}`

var ctx = context.Background()

func TestRateLimitedIsRetriedAfterRetryAfter(t *testing.T) {
	f := newFake(t, reply(429, errBody("rate_limited", "slow down", `{"limit":"requests_per_second"}`),
		"Retry-After", "0.2", "X-Request-Id", "req_r"), reply(200, profilesJSON))
	var infos []RetryInfo
	c := f.client(t, WithOnRetry(func(i RetryInfo) { infos = append(infos, i) }))
	t0 := time.Now()
	pl, err := c.Profiles(ctx)
	if err != nil || pl.Get("container") == nil || !pl.Get("container").Available {
		t.Fatalf("%v %+v", err, pl)
	}
	if el := time.Since(t0); el < 200*time.Millisecond {
		t.Fatalf("Retry-After not honoured: %v", el)
	}
	if len(infos) != 1 || infos[0].RetryAfter != 200*time.Millisecond || infos[0].Why != "HTTP 429" ||
		infos[0].RequestID != "req_r" || infos[0].Attempt != 1 || infos[0].Operation != "listProfiles" {
		t.Fatalf("%+v", infos)
	}
}

func TestACreateRefusedBy429IsRetried(t *testing.T) {
	f := newFake(t, reply(429, errBody("rate_limited", "x", ""), "Retry-After", "0"),
		reply(202, `{"id":"exe_1","status":"queued","profile":"container"}`))
	c := f.client(t)
	cr, err := c.Sandbox.Executions.Create(ctx, &ExecutionCreateRequest{Command: []string{"true"}})
	if err != nil || cr.ID != "exe_1" || len(f.seen()) != 2 {
		t.Fatalf("%v %+v %d", err, cr, len(f.seen()))
	}
}

func TestTenantQuotaIsNotRetriedButQueueFullIs(t *testing.T) {
	f := newFake(t, reply(429, errBody("quota_exceeded", "too many", `{"limit":"sessions"}`)))
	_, err := f.client(t).Sandbox.Sessions.Create(ctx, nil)
	var ae *APIError
	if !errors.Is(err, ErrQuotaExceeded) || !errors.As(err, &ae) || ae.Limit() != "sessions" ||
		len(f.seen()) != 1 {
		t.Fatalf("%v %d", err, len(f.seen()))
	}
	g := newFake(t, reply(429, errBody("quota_exceeded", "queue full", "")),
		reply(202, `{"id":"exe_2","status":"queued"}`))
	if _, err := g.client(t).Sandbox.Executions.Create(ctx, nil); err != nil || len(g.seen()) != 2 {
		t.Fatalf("%v %d", err, len(g.seen()))
	}
}

func TestA503IsRetriedABoundedNumberOfTimesA500Never(t *testing.T) {
	f := newFake(t, reply(503, errBody("runtime_unavailable", "down", "")))
	_, err := f.client(t, WithMaxRetries(2)).Profiles(ctx)
	if !errors.Is(err, ErrRuntimeUnavailable) || len(f.seen()) != 3 {
		t.Fatalf("%v %d", err, len(f.seen()))
	}
	g := newFake(t, reply(500, errBody("internal", "boom", "")))
	_, err = g.client(t).Profiles(ctx)
	if !errors.Is(err, ErrInternal) || len(g.seen()) != 1 {
		t.Fatalf("%v %d", err, len(g.seen()))
	}
}

func TestADroppedPOSTIsNotSentAgainADroppedGETIs(t *testing.T) {
	f := newFake(t, hangup, reply(200, profilesJSON))
	if _, err := f.client(t).Profiles(ctx); err != nil || len(f.seen()) != 2 {
		t.Fatalf("%v %d", err, len(f.seen()))
	}
	g := newFake(t, hangup, reply(202, `{"id":"exe_1"}`))
	_, err := g.client(t).Sandbox.Executions.Create(ctx, nil)
	var te *TransportError
	if !errors.As(err, &te) || te.Op != "createExecution" || len(g.seen()) != 1 {
		t.Fatalf("%v %d", err, len(g.seen()))
	}
}

func TestARefusedConnectionIsRetriedEvenForAPOST(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	n := 0
	c, _ := NewClient(WithBaseURL("http://"+addr), WithMaxRetries(2),
		WithBackoff(time.Millisecond, time.Millisecond), WithOnRetry(func(RetryInfo) { n++ }))
	_, err = c.Sandbox.Executions.Create(ctx, nil)
	var te *TransportError
	if !errors.As(err, &te) || n != 2 {
		t.Fatalf("%v %d", err, n)
	}
}

func TestBackoffGrowsAndRetryAfterIsCapped(t *testing.T) {
	tr, _ := newTransport(config{baseURL: "http://x", backoff: 100 * time.Millisecond,
		maxBackoff: 400 * time.Millisecond, maxRetryAfter: 2 * time.Second})
	for attempt, max := range []time.Duration{100, 200, 400, 400, 400} {
		d := tr.delay(attempt, 0)
		if d < max*time.Millisecond/2 || d > max*time.Millisecond {
			t.Fatalf("attempt %d: %v", attempt, d)
		}
	}
	if d := tr.delay(0, time.Hour); d < 2*time.Second || d > 2100*time.Millisecond {
		t.Fatalf("Retry-After not capped: %v", d)
	}
}

func TestEveryCodeIsItsSentinel(t *testing.T) {
	for code, sentinel := range errorsByCode {
		f := newFake(t, reply(400, errBody(code, "m", `{"field":"limits.memory"}`),
			"X-Request-Id", "req_hdr"))
		_, err := f.client(t, WithMaxRetries(0)).Profiles(ctx)
		var ae *APIError
		if !errors.Is(err, sentinel) || !errors.As(err, &ae) {
			t.Fatalf("%s: %v", code, err)
		}
		if ae.Code != code || ae.Message != "m" || ae.MessageI18n["fr"] != "fr: m" ||
			ae.RequestID != "req_1" || ae.Field() != "limits.memory" || ae.Status != 400 {
			t.Fatalf("%+v", ae)
		}
		for other, s := range errorsByCode {
			if other != code && errors.Is(err, s) {
				t.Fatalf("%s matches %s", code, other)
			}
		}
	}
}

func TestANonEnvelopeError(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_proxy")
		w.WriteHeader(502)
		io.WriteString(w, "<html>bad gateway</html>")
	})
	_, err := f.client(t).Profiles(ctx)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != "http_502" || ae.Message != "<html>bad gateway</html>" ||
		ae.RequestID != "req_proxy" || errors.Is(err, ErrBadGateway) {
		t.Fatalf("%v", err)
	}
	if !strings.Contains(err.Error(), "502 http_502") || !strings.Contains(err.Error(), "req_proxy") {
		t.Fatal(err.Error())
	}
}

func TestHeaders(t *testing.T) {
	f := newFake(t, reply(200, profilesJSON))
	c := f.client(t, WithLanguage("fr"), WithHeader("X-Extra", "1"))
	c.Profiles(ContextWithRequestID(ctx, "req_mine"))
	h := f.seen()[0].Header
	if h.Get("Authorization") != "Bearer sbx_test" || h.Get("Accept-Language") != "fr" ||
		h.Get("User-Agent") != "sandboxd-go/"+Version || h.Get("X-Request-Id") != "req_mine" ||
		h.Get("X-Extra") != "1" || h.Get("Accept") != "application/json" || h.Get("traceparent") != "" {
		t.Fatalf("%v", h)
	}
	// traceparent: the call's context, then WithTraceparentFunc, then TRACEPARENT
	tp := func(n string) string { return "00-" + strings.Repeat(n, 32) + "-" + strings.Repeat(n, 16) + "-01" }
	c2, _ := c.With(WithTraceparentFunc(func(ctx context.Context) string {
		if ctx.Value(ctxKey(99)) != nil {
			return tp("b")
		}
		return ""
	}))
	t.Setenv("TRACEPARENT", tp("c"))
	c2.Profiles(ContextWithTraceparent(ctx, tp("a")))
	c2.Profiles(context.WithValue(ctx, ctxKey(99), true))
	c2.Profiles(ctx)
	got := []string{}
	for _, s := range f.seen()[1:] {
		got = append(got, s.Header.Get("traceparent"))
	}
	if strings.Join(got, " ") != strings.Join([]string{tp("a"), tp("b"), tp("c")}, " ") {
		t.Fatalf("%v", got)
	}
}

func TestEnvironmentDefaults(t *testing.T) {
	f := newFake(t, reply(200, `{"status":"ok"}`))
	t.Setenv("SANDBOXD_URL", f.URL+"/")
	t.Setenv("SANDBOXD_API_KEY", "sbx_env")
	c, err := NewClient()
	if err != nil || c.BaseURL() != f.URL {
		t.Fatalf("%v %s", err, c.BaseURL())
	}
	if h, err := c.Healthz(ctx); err != nil || h.Status != "ok" ||
		f.seen()[0].Header.Get("Authorization") != "Bearer sbx_env" {
		t.Fatalf("%v %+v", err, h)
	}
	t.Setenv("SANDBOXD_URL", "")
	if c, _ := NewClient(); c.BaseURL() != DefaultURL {
		t.Fatal(c.BaseURL())
	}
	if _, err := NewClient(WithBaseURL("ftp://x")); err == nil {
		t.Fatal("ftp accepted")
	}
}

func TestPathsAndQueries(t *testing.T) {
	f := newFake(t, reply(204, ""), reply(200, `{"entries":[{"name":"a b"}]}`))
	c := f.client(t)
	if err := c.Images.Delete(ctx, "127.0.0.1:5000/tools/jq@sha256:ab"); err != nil {
		t.Fatal(err)
	}
	s := c.Sandbox.Sessions.Session("ses_1")
	ents, err := s.Files.List(ctx, "/work/a b&c", &DirOptions{Recursive: true, MaxDepth: 2})
	if err != nil || ents[0].Name != "a b" {
		t.Fatal(err)
	}
	r := f.seen()
	if r[0].Method != "DELETE" || r[0].RawPath != "/v1/sandbox/images/127.0.0.1:5000/tools/jq@sha256:ab" {
		t.Fatalf("%+v", r[0])
	}
	if r[1].Path != "/v1/sandbox/sessions/ses_1/files" ||
		r[1].Query != "list=true&max_depth=2&path=%2Fwork%2Fa+b%26c&recursive=true" {
		t.Fatalf("%+v", r[1])
	}
	// the route table is the only source: an undeclared parameter is refused
	tr := c.t
	if _, err := tr.url(&call{op: "getSession", params: map[string]string{"id": "x"},
		query: query{}.str("nope", "1")}); err == nil {
		t.Fatal("undeclared query parameter sent")
	}
	if _, err := tr.url(&call{op: "getSession"}); err == nil {
		t.Fatal("missing path parameter accepted")
	}
	if u, _ := tr.url(&call{op: "getSession", params: map[string]string{"id": "a/b"}}); !strings.HasSuffix(u, "/sessions/a%2Fb") {
		t.Fatal(u)
	}
}

func slow(d time.Duration, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		h(w, r)
	}
}

func TestTimeoutsAndTheCallersContext(t *testing.T) {
	f := newFake(t, slow(2*time.Second, reply(200, profilesJSON)))
	c := f.client(t, WithTimeout(100*time.Millisecond), WithMaxRetries(1))
	_, err := c.Profiles(ctx)
	var te *TransportError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &te) || !te.Timeout() ||
		len(f.seen()) != 2 {
		t.Fatalf("%v %d", err, len(f.seen())) // a GET that timed out is tried again
	}
	g := newFake(t, slow(2*time.Second, reply(202, `{}`)))
	_, err = g.client(t, WithTimeout(100*time.Millisecond)).Sandbox.Executions.Create(ctx, nil)
	if !errors.Is(err, context.DeadlineExceeded) || len(g.seen()) != 1 {
		t.Fatalf("%v %d", err, len(g.seen())) // a POST is not
	}
	// the caller's deadline: no retry
	h := newFake(t, slow(2*time.Second, reply(200, profilesJSON)))
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err = h.client(t).Profiles(cctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) > time.Second || len(h.seen()) != 1 {
		t.Fatalf("%v %v", err, time.Since(t0))
	}
	// cancelled during a backoff sleep: returns at once
	k := newFake(t, reply(429, errBody("rate_limited", "x", ""), "Retry-After", "30"))
	cctx2, cancel2 := context.WithCancel(ctx)
	c2 := k.client(t, WithOnRetry(func(RetryInfo) { cancel2() }))
	t0 = time.Now()
	if _, err = c2.Profiles(cctx2); !errors.Is(err, context.Canceled) || time.Since(t0) > 5*time.Second {
		t.Fatalf("%v %v", err, time.Since(t0))
	}
}

func sse(events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for _, e := range events {
			io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	}
}

var execEvents = []string{
	": keep-alive\n\n",
	"event: stdout\r\ndata: {\"data\":\"one\\n\",\"offset\":0}\r\n\r\n",
	"event: stderr\ndata: {\"data_base64\":\"/wA=\",\"offset\":0}\n\n",
	"event: gap\ndata: {\"stream\":\"stdout\",\"from\":4,\n",
	"data: \"to\":9,\"dropped_bytes\":5}\n\n",
	"event: surprise\ndata: {}\n\n",
	"event: exit\ndata: {\"status\":\"failed\",\"exit_code\":3,\"signal\":null,\"stdout\":\"one\\n\"}\n\n",
	"event: stdout\ndata: {\"data\":\"after exit\",\"offset\":4}\n\n",
}

func TestAnExecStream(t *testing.T) {
	f := newFake(t, sse(execEvents...))
	s := f.client(t).Sandbox.Sessions.Session("ses_1")
	st, err := s.Stream(ctx, []string{"sh", "-c", "x"}, &ExecRequest{TimeoutS: 5})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for st.Next() {
		ev := st.Event()
		switch ev.Event {
		case "stdout", "stderr":
			got = append(got, fmt.Sprintf("%s:%q", ev.Event, ev.Bytes))
		case "gap":
			got = append(got, fmt.Sprintf("gap:%d", ev.Gap.DroppedBytes))
		case "exit":
			got = append(got, fmt.Sprintf("exit:%d", *ev.Result.ExitCode))
		}
	}
	want := `stdout:"one\n" stderr:"\xff\x00" gap:5 exit:3`
	if st.Err() != nil || strings.Join(got, " ") != want {
		t.Fatalf("%v %s", st.Err(), strings.Join(got, " "))
	}
	r := f.seen()[0]
	var body map[string]any
	json.Unmarshal(r.Body, &body)
	if r.Header.Get("Accept") != "text/event-stream" || body["timeout_s"] != 5.0 ||
		fmt.Sprint(body["command"]) != "[sh -c x]" {
		t.Fatalf("%+v %s", r.Header, r.Body)
	}
	// the callback form
	n := 0
	res, err := s.ExecStream(ctx, []string{"true"}, nil, func(ev StreamEvent) error { n++; return nil })
	if err != nil || *res.ExitCode != 3 || n != 4 {
		t.Fatalf("%v %+v %d", err, res, n)
	}
	// an error from the callback stops the stream and is returned
	stop := errors.New("stop")
	if _, err := s.ExecStream(ctx, []string{"true"}, nil, func(StreamEvent) error { return stop }); err != stop {
		t.Fatal(err)
	}
}

func TestAStreamEndedByTheSessionOrCutSaysSo(t *testing.T) {
	f := newFake(t, sse("event: end\ndata: {\"reason\":\"session_deleted\"}\n\n"),
		sse("event: stdout\ndata: {\"data\":\"x\",\"offset\":0}\n\n"),
		func(w http.ResponseWriter, r *http.Request) {
			sse("event: stdout\ndata: {\"data\":\"x\",\"offset\":0}\n\n")(w, r)
			<-r.Context().Done()
		})
	c := f.client(t)
	p := &BackgroundProcess{PID: 7, procs: c.Sandbox.Sessions.Session("ses_1").Processes}
	if _, err := p.Wait(ctx); err == nil || !strings.Contains(err.Error(), "session_deleted") {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err == nil || !strings.Contains(err.Error(), "without exit") {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := p.Wait(cctx)
	var te *TransportError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &te) || te.Op != "getProcessOutput" {
		t.Fatal(err)
	}
	if q := f.seen()[0]; q.Path != "/v1/sandbox/sessions/ses_1/processes/7/output" {
		t.Fatal(q.Path)
	}
}

func TestWatch(t *testing.T) {
	f := newFake(t, sse("event: ready\ndata: {}\n\n",
		"event: move\ndata: {\"type\":\"move\",\"path\":\"/w/b\",\"from\":\"/w/a\",\"to\":\"/w/b\"}\n\n",
		"event: overflow\ndata: {\"dropped\":3}\n\n", "event: end\ndata: {\"reason\":\"removed\"}\n\n",
		"event: create\ndata: {}\n\n"))
	st, err := f.client(t).Sandbox.Sessions.Session("ses_1").Watch(ctx, "/w", true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	st.Each(func(ev WatchEvent) error {
		got = append(got, ev.Type+":"+ev.From+ev.To+fmt.Sprint(ev.Dropped)+ev.Reason)
		return nil
	})
	if strings.Join(got, " ") != "ready:0 move:/w/a/w/b0 overflow:3 end:0removed" {
		t.Fatal(got)
	}
	if q := f.seen()[0].Query; q != "path=%2Fw&recursive=true" {
		t.Fatal(q)
	}
}

func TestExecuteLongPollsUntilFinal(t *testing.T) {
	f := newFake(t, reply(202, `{"id":"exe_1","status":"queued","profile":"gvisor"}`),
		reply(200, `{"id":"exe_1","status":"running"}`),
		reply(200, `{"id":"exe_1","status":"succeeded","exit_code":0,"stdout":"1\n","files":[]}`))
	c := f.client(t)
	ex, err := c.Sandbox.Execute(ctx, "python:3.12-slim", []string{"python", "-c", "print(1)"},
		&ExecutionCreateRequest{Profile: "gvisor", Files: []InputFile{BinaryFile("/w/b", []byte{0, 0xff}),
			TextFile("/w/t", "hi")}, Limits: &LimitsRequest{TimeoutS: 30}})
	if err != nil || ex.Status != "succeeded" || *ex.ExitCode != 0 || ex.Stdout != "1\n" || !ex.Final() {
		t.Fatalf("%v %+v", err, ex)
	}
	r := f.seen()
	var body map[string]any
	json.Unmarshal(r[0].Body, &body)
	files := fmt.Sprint(body["files"])
	if body["image"] != "python:3.12-slim" || body["profile"] != "gvisor" ||
		files != "[map[content:AP8= encoding:base64 path:/w/b] map[content:hi path:/w/t]]" {
		t.Fatalf("%s", r[0].Body)
	}
	if r[1].Path != "/v1/sandbox/executions/exe_1" || r[1].Query != "wait_s=30" || r[2].Query != "wait_s=30" {
		t.Fatalf("%+v", r[1:])
	}
	if string(DecodeOutput("AP8=", "base64")) != "\x00\xff" || string(DecodeOutput("x", "utf-8")) != "x" {
		t.Fatal("DecodeOutput")
	}
}

func TestPullWithProgressAndAFailedPull(t *testing.T) {
	f := newFake(t,
		sse("event: progress\ndata: {\"blob\":\"sha256:a\",\"done\":1,\"total\":2}\n\n",
			"event: progress\ndata: {\"blob\":\"sha256:a\",\"done\":2,\"total\":2}\n\n",
			"event: done\ndata: {\"ref\":\"r\",\"digest\":\"sha256:d\"}\n\n"),
		reply(200, `{"ref":"r","digest":"sha256:e"}`),
		sse("event: error\ndata: {\"code\":\"bad_gateway\",\"message\":\"registry said 500\",\"request_id\":\"req_p\"}\n\n"))
	c := f.client(t)
	var prog []int64
	img, err := c.Images.Pull(ctx, "r", func(p PullProgress) { prog = append(prog, p.Done) })
	if err != nil || img.Digest != "sha256:d" || fmt.Sprint(prog) != "[1 2]" {
		t.Fatalf("%v %+v %v", err, img, prog)
	}
	// an answer in JSON instead of a stream (nothing to download)
	if img, err = c.Images.Pull(ctx, "r", func(PullProgress) {}); err != nil || img.Digest != "sha256:e" {
		t.Fatalf("%v %+v", err, img)
	}
	_, err = c.Images.Pull(ctx, "r", func(PullProgress) {})
	var ae *APIError
	if !errors.Is(err, ErrBadGateway) || !errors.As(err, &ae) || ae.Status != 502 || ae.RequestID != "req_p" {
		t.Fatal(err)
	}
}

func TestEachFollowsCursors(t *testing.T) {
	f := newFake(t, reply(200, `{"executions":[{"id":"a"},{"id":"b"}],"next_cursor":"c1"}`),
		reply(200, `{"executions":[{"id":"c"}],"next_cursor":null}`),
		reply(200, `{"events":[{"seq":1},{"seq":2}],"next_cursor":2}`),
		reply(200, `{"events":[{"seq":3}],"next_cursor":null}`))
	c := f.client(t)
	var ids []string
	err := c.Sandbox.Executions.Each(ctx, &ListOptions{Status: "succeeded"}, func(e *Execution) bool {
		ids = append(ids, e.ID)
		return true
	})
	if err != nil || strings.Join(ids, "") != "abc" {
		t.Fatal(err, ids)
	}
	var seqs []int64
	if err := c.Audit.Each(ctx, nil, func(e *AuditEvent) bool { seqs = append(seqs, e.Seq); return true }); err != nil ||
		fmt.Sprint(seqs) != "[1 2 3]" {
		t.Fatal(err, seqs)
	}
	r := f.seen()
	if r[0].Query != "limit=200&status=succeeded" || r[1].Query != "cursor=c1&limit=200&status=succeeded" ||
		r[3].Query != "after=2&limit=1000" {
		t.Fatalf("%s | %s | %s", r[0].Query, r[1].Query, r[3].Query)
	}
}

func TestModelsReadAndWriteTheirJSON(t *testing.T) {
	b, _ := json.Marshal(SessionPatchRequest{TTLS: 10, ResetNetwork: true, ClearMetadata: true})
	if string(b) != `{"metadata":null,"network":null,"ttl_s":10}` {
		t.Fatal(string(b))
	}
	b, _ = json.Marshal(&SessionPatchRequest{Metadata: map[string]string{"a": "b"}})
	if string(b) != `{"metadata":{"a":"b"}}` {
		t.Fatal(string(b))
	}
	var ps []Process
	if err := json.Unmarshal([]byte(`[{"pid":1,"pty":false},{"pid":2,"pty":{"cols":80,"rows":24}}]`), &ps); err != nil ||
		ps[0].Pty.Enabled || !ps[1].Pty.Enabled || ps[1].Pty.Cols != 80 {
		t.Fatal(err, ps)
	}
	var r ContextRunResult
	json.Unmarshal([]byte(`{"status":"succeeded","result":"42","error":null}`), &r)
	if r.Result == nil || *r.Result != "42" || r.Error != nil {
		t.Fatal(r)
	}
}

func TestReadyzAnswersANotReadyReport(t *testing.T) {
	f := newFake(t, reply(503, `{"status":"not_ready","checks":{"store":"down"}}`))
	r, err := f.client(t, WithMaxRetries(0)).Readyz(ctx)
	if err != nil || r.Status != "not_ready" || r.Checks["store"] != "down" {
		t.Fatal(err, r)
	}
}

func TestSessionCallsSendTheirBodies(t *testing.T) {
	f := newFake(t, reply(201, `{"id":"ses_1","status":"ready","metadata":{"a":"b"}}`),
		reply(202, `{"pid":9}`), reply(200, `{"written":3,"eof":true}`),
		reply(200, `{"pid":9,"signal":15}`), reply(201, `{"id":"ctx_1","status":"ready"}`),
		reply(200, `{"status":"succeeded","result":"2"}`), reply(200, `{"id":"ses_1","ttl_s":10}`))
	c := f.client(t)
	s, err := c.Sandbox.Sessions.Create(ctx, &SessionCreateRequest{Profile: "container",
		Network: &NetworkRequest{Egress: "allowlist", Allow: []string{"pypi.org"}}})
	if err != nil || s.ID() != "ses_1" || s.Status() != "ready" || s.Files.sid != "ses_1" {
		t.Fatal(err, s)
	}
	p, err := s.Start(ctx, []string{"cat"}, &ExecRequest{Pty: &PtySize{Cols: 80, Rows: 24}})
	if err != nil || p.PID != 9 {
		t.Fatal(err)
	}
	if w, err := p.Stdin(ctx, []byte("hi\n"), true); err != nil || !w.EOF {
		t.Fatal(err)
	}
	if sg, err := p.Signal(ctx, "TERM"); err != nil || sg.Signal != 15 {
		t.Fatal(err)
	}
	cx, err := s.Contexts.Create(ctx, "python")
	if err != nil || cx.ID() != "ctx_1" {
		t.Fatal(err)
	}
	if rr, err := cx.Run(ctx, "1+1", 3); err != nil || *rr.Result != "2" {
		t.Fatal(err)
	}
	if err := s.Update(ctx, &SessionPatchRequest{TTLS: 10}); err != nil || s.Info.TTLS != 10 {
		t.Fatal(err)
	}
	r := f.seen()
	want := []string{
		`POST /v1/sandbox/sessions  {"profile":"container","network":{"egress":"allowlist","allow":["pypi.org"]}}`,
		`POST /v1/sandbox/sessions/ses_1/exec  {"command":["cat"],"background":true,"pty":{"cols":80,"rows":24}}`,
		`POST /v1/sandbox/sessions/ses_1/processes/9/stdin eof=true hi\n`,
		`POST /v1/sandbox/sessions/ses_1/processes/9/signal  {"signal":"TERM"}`,
		`POST /v1/sandbox/sessions/ses_1/contexts  {"language":"python"}`,
		`POST /v1/sandbox/sessions/ses_1/contexts/ctx_1/run  {"code":"1+1","timeout_s":3}`,
		`PATCH /v1/sandbox/sessions/ses_1  {"ttl_s":10}`,
	}
	for i, w := range want {
		got := strings.ReplaceAll(fmt.Sprintf("%s %s %s %s", r[i].Method, r[i].Path, r[i].Query, r[i].Body), "\n", `\n`)
		if got != w {
			t.Fatalf("request %d:\n got %s\nwant %s", i, got, w)
		}
	}
	if ct := r[2].Header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Fatal(ct)
	}
}

func TestWithCopiesTheClient(t *testing.T) {
	f := newFake(t, reply(404, errBody("not_found", "no", "")))
	c := f.client(t)
	fr, err := c.With(WithLanguage("fr"))
	if err != nil {
		t.Fatal(err)
	}
	fr.Sandbox.Sessions.Get(ctx, "ses_x")
	c.Sandbox.Sessions.Get(ctx, "ses_x")
	r := f.seen()
	if r[0].Header.Get("Accept-Language") != "fr" || r[1].Header.Get("Accept-Language") != "" ||
		r[0].Header.Get("Authorization") != "Bearer sbx_test" {
		t.Fatal(r[0].Header, r[1].Header)
	}
}
