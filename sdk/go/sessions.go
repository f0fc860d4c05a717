package sandboxd

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// SessionsService is the long-lived sandboxes: create, get, list, patch,
// delete; each session's own calls are on *SandboxSession.
type SessionsService struct{ t *transport }

const startTimeout = 120 * time.Second // a sandbox or an interpreter starting

// Create starts a session (req may be nil: the default profile).
// Delete it when done: defer s.Delete(ctx).
func (ss *SessionsService) Create(ctx context.Context, req *SessionCreateRequest) (*SandboxSession, error) {
	if req == nil {
		req = &SessionCreateRequest{}
	}
	var info Session
	err := ss.t.json(ctx, &call{op: "createSession", json: req, expect: []int{201},
		timeout: ss.t.atLeast(startTimeout)}, &info)
	if err != nil {
		return nil, err
	}
	return newSandboxSession(ss.t, &info), nil
}

// Get is a session by id, with its current state.
func (ss *SessionsService) Get(ctx context.Context, id string) (*SandboxSession, error) {
	var info Session
	if err := ss.t.json(ctx, &call{op: "getSession", params: map[string]string{"id": id}}, &info); err != nil {
		return nil, err
	}
	return newSandboxSession(ss.t, &info), nil
}

// Session is a handle on a session by id, without asking the daemon.
func (ss *SessionsService) Session(id string) *SandboxSession {
	return newSandboxSession(ss.t, &Session{ID: id})
}

// List is one page of the tenant's sessions.
func (ss *SessionsService) List(ctx context.Context, o *ListOptions) (*SessionList, error) {
	var out SessionList
	return &out, ss.t.json(ctx, &call{op: "listSessions", query: o.query()}, &out)
}

// Each calls fn for every session of the tenant, following the cursors,
// until fn returns false.
func (ss *SessionsService) Each(ctx context.Context, o *ListOptions, fn func(*Session) bool) error {
	return eachItem(o, fn, func(lo *ListOptions) ([]Session, *string, error) {
		page, err := ss.List(ctx, lo)
		if err != nil {
			return nil, nil, err
		}
		return page.Sessions, page.NextCursor, nil
	})
}

// Update patches a session: only the fields set change.
func (ss *SessionsService) Update(ctx context.Context, id string, p *SessionPatchRequest) (*Session, error) {
	if p == nil {
		p = &SessionPatchRequest{}
	}
	var out Session
	return &out, ss.t.json(ctx, &call{op: "updateSession", params: map[string]string{"id": id}, json: p}, &out)
}

// Delete ends a session.
func (ss *SessionsService) Delete(ctx context.Context, id string) error {
	_, err := ss.t.send(ctx, &call{op: "deleteSession", params: map[string]string{"id": id},
		expect: []int{204}})
	return err
}

// SandboxSession is a live session: its last known state in Info, and its
// calls.  Files, Processes and Contexts are its files, background
// processes and interpreters.
type SandboxSession struct {
	Info      *Session
	Files     *FilesService
	Processes *ProcessesService
	Contexts  *ContextsService
	t         *transport
}

func newSandboxSession(t *transport, info *Session) *SandboxSession {
	return &SandboxSession{Info: info, t: t, Files: &FilesService{t, info.ID},
		Processes: &ProcessesService{t, info.ID}, Contexts: &ContextsService{t, info.ID}}
}

// ID is the session's id.
func (s *SandboxSession) ID() string { return s.Info.ID }

// Status is the session's last known status (ready, terminated, …).
func (s *SandboxSession) Status() string { return s.Info.Status }

// Refresh reads the session's current state into Info.
func (s *SandboxSession) Refresh(ctx context.Context) error {
	n, err := (&SessionsService{s.t}).Get(ctx, s.ID())
	if err == nil {
		s.Info = n.Info
	}
	return err
}

// Update patches the session; Info is the state after.
func (s *SandboxSession) Update(ctx context.Context, p *SessionPatchRequest) error {
	info, err := (&SessionsService{s.t}).Update(ctx, s.ID(), p)
	if err == nil {
		s.Info = info
	}
	return err
}

// Delete ends the session.
func (s *SandboxSession) Delete(ctx context.Context) error {
	return (&SessionsService{s.t}).Delete(ctx, s.ID())
}

func (s *SandboxSession) execCall(command []string, req *ExecRequest) (*call, int) {
	r := ExecRequest{}
	if req != nil {
		r = *req
	}
	if command != nil {
		r.Command = command
	}
	ts := r.TimeoutS
	if ts == 0 {
		ts = 300
	}
	return &call{op: "execInSession", params: map[string]string{"id": s.ID()}, json: &r}, ts
}

// Exec runs a command (command overrides req.Command; req may be nil) and
// waits for its result: a non-zero exit or a timeout is a result, not an
// error.  The request's timeout stretches to timeout_s + 30 s.
func (s *SandboxSession) Exec(ctx context.Context, command []string, req *ExecRequest) (*ExecResult, error) {
	c, ts := s.execCall(command, req)
	c.timeout = s.t.atLeast(time.Duration(ts+30) * time.Second)
	var out ExecResult
	return &out, s.t.json(ctx, c, &out)
}

// Stream runs the same exec streamed: "stdout" / "stderr" events as the
// output is read, then "exit" with the result.  Closing the stream early
// (or cancelling ctx) disconnects, which kills the command.
func (s *SandboxSession) Stream(ctx context.Context, command []string, req *ExecRequest) (*Stream[StreamEvent], error) {
	c, _ := s.execCall(command, req)
	c.stream = true
	a, err := s.t.send(ctx, c)
	if err != nil {
		return nil, err
	}
	return newStream("execInSession", a, execEvent), nil
}

// ExecStream is Stream with a callback: fn gets every event (an error
// from fn stops the command and is returned); the result at the end.
func (s *SandboxSession) ExecStream(ctx context.Context, command []string, req *ExecRequest,
	fn func(StreamEvent) error) (*ExecResult, error) {
	st, err := s.Stream(ctx, command, req)
	if err != nil {
		return nil, err
	}
	return resultOf(st, fn, "exec")
}

// resultOf runs a stream to its exit event.
func resultOf(st *Stream[StreamEvent], fn func(StreamEvent) error, what string) (*ExecResult, error) {
	var res *ExecResult
	var end string
	err := st.Each(func(ev StreamEvent) error {
		res = ev.Result
		end = ev.Reason
		if fn != nil {
			return fn(ev)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if res == nil {
		if end != "" {
			return nil, fmt.Errorf("sandboxd: %s stream ended without exit: session %s", what, end)
		}
		return nil, fmt.Errorf("sandboxd: %s stream ended without exit", what)
	}
	return res, nil
}

// Start starts a background process (it outlives this call); set
// req.Pty for a terminal.
func (s *SandboxSession) Start(ctx context.Context, command []string, req *ExecRequest) (*BackgroundProcess, error) {
	c, _ := s.execCall(command, req)
	c.json.(*ExecRequest).Background = true
	c.expect = []int{202}
	var out struct {
		PID int `json:"pid"`
	}
	if err := s.t.json(ctx, c, &out); err != nil {
		return nil, err
	}
	return &BackgroundProcess{PID: out.PID, procs: s.Processes}, nil
}

// Watch streams the file events under a directory (see FilesService.Watch).
func (s *SandboxSession) Watch(ctx context.Context, path string, recursive bool) (*Stream[WatchEvent], error) {
	return s.Files.Watch(ctx, path, recursive)
}

// ProcessesService is a session's background processes.
type ProcessesService struct {
	t   *transport
	sid string
}

func (p *ProcessesService) params(pid int) map[string]string {
	return map[string]string{"id": p.sid, "pid": strconv.Itoa(pid)}
}

// List is the session's background processes.
func (p *ProcessesService) List(ctx context.Context) ([]Process, error) {
	var out struct {
		Processes []Process `json:"processes"`
	}
	err := p.t.json(ctx, &call{op: "listProcesses", params: map[string]string{"id": p.sid}}, &out)
	return out.Processes, err
}

// Get is one process.
func (p *ProcessesService) Get(ctx context.Context, pid int) (*Process, error) {
	var out Process
	return &out, p.t.json(ctx, &call{op: "getProcess", params: p.params(pid)}, &out)
}

// OutputOptions are the offsets to read a process's output from.
type OutputOptions struct {
	Offset       int64 // both streams
	StdoutOffset int64
	StderrOffset int64
}

func (o *OutputOptions) query() query {
	if o == nil {
		return nil
	}
	return query{}.num("offset", o.Offset).num("stdout_offset", o.StdoutOffset).
		num("stderr_offset", o.StderrOffset)
}

// Output is the kept output from the offsets (o may be nil).
func (p *ProcessesService) Output(ctx context.Context, pid int, o *OutputOptions) (*ProcessOutput, error) {
	var out ProcessOutput
	return &out, p.t.json(ctx, &call{op: "getProcessOutput", params: p.params(pid), query: o.query()}, &out)
}

// Follow replays the kept output from the offsets, then follows it live;
// the stream ends with "exit" (or "end" if the session ends first).
func (p *ProcessesService) Follow(ctx context.Context, pid int, o *OutputOptions) (*Stream[StreamEvent], error) {
	a, err := p.t.send(ctx, &call{op: "getProcessOutput", params: p.params(pid), query: o.query(),
		stream: true})
	if err != nil {
		return nil, err
	}
	return newStream("getProcessOutput", a, execEvent), nil
}

// Stdin appends data to the process's stdin; eof closes it after.
func (p *ProcessesService) Stdin(ctx context.Context, pid int, data []byte, eof bool) (*StdinWritten, error) {
	if data == nil {
		data = []byte{}
	}
	var out StdinWritten
	return &out, p.t.json(ctx, &call{op: "writeProcessStdin", params: p.params(pid),
		query: query{}.flag("eof", eof), body: data}, &out)
}

// Signal sends a signal by name (TERM, SIGINT, KILL, …) to the process group.
func (p *ProcessesService) Signal(ctx context.Context, pid int, signal string) (*Signalled, error) {
	var out Signalled
	return &out, p.t.json(ctx, &call{op: "signalProcess", params: p.params(pid),
		json: map[string]string{"signal": signal}}, &out)
}

// Resize sets a terminal process's size.
func (p *ProcessesService) Resize(ctx context.Context, pid, cols, rows int) error {
	_, err := p.t.send(ctx, &call{op: "resizeProcessTerminal", params: p.params(pid),
		json: PtySize{Cols: cols, Rows: rows}})
	return err
}

// Wait follows the output until the process ends; its result.
func (p *ProcessesService) Wait(ctx context.Context, pid int) (*ExecResult, error) {
	st, err := p.Follow(ctx, pid, nil)
	if err != nil {
		return nil, err
	}
	return resultOf(st, nil, fmt.Sprintf("process %d output", pid))
}

// BackgroundProcess is a handle on a background process.
type BackgroundProcess struct {
	PID   int
	procs *ProcessesService
}

// Get is the process's state.
func (b *BackgroundProcess) Get(ctx context.Context) (*Process, error) {
	return b.procs.Get(ctx, b.PID)
}

// Output is its kept output from the offsets (o may be nil).
func (b *BackgroundProcess) Output(ctx context.Context, o *OutputOptions) (*ProcessOutput, error) {
	return b.procs.Output(ctx, b.PID, o)
}

// Follow streams its output (see ProcessesService.Follow).
func (b *BackgroundProcess) Follow(ctx context.Context, o *OutputOptions) (*Stream[StreamEvent], error) {
	return b.procs.Follow(ctx, b.PID, o)
}

// Stdin writes to its stdin; eof closes it after.
func (b *BackgroundProcess) Stdin(ctx context.Context, data []byte, eof bool) (*StdinWritten, error) {
	return b.procs.Stdin(ctx, b.PID, data, eof)
}

// Signal signals it (TERM, INT, KILL, …).
func (b *BackgroundProcess) Signal(ctx context.Context, signal string) (*Signalled, error) {
	return b.procs.Signal(ctx, b.PID, signal)
}

// Resize sets its terminal's size.
func (b *BackgroundProcess) Resize(ctx context.Context, cols, rows int) error {
	return b.procs.Resize(ctx, b.PID, cols, rows)
}

// Wait waits for it to end; its result.
func (b *BackgroundProcess) Wait(ctx context.Context) (*ExecResult, error) {
	return b.procs.Wait(ctx, b.PID)
}
