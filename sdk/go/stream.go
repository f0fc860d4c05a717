package sandboxd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Stream is an open Server-Sent Events answer (an exec's output, a
// process followed, a directory watched), read like a bufio.Scanner:
//
//	for st.Next() {
//		ev := st.Event()
//		…
//	}
//	if err := st.Err(); err != nil { … }
//
// The stream closes itself after its last event (exit, end) or an error;
// Close drops it early (for a foreground exec, the daemon then kills the
// command).  Cancelling the context given to the call that opened it
// closes it too.
type Stream[T any] struct {
	op     string
	ans    *answer
	r      *bufio.Reader
	single []byte // a JSON answer instead of a stream: one "json" event
	conv   func(name string, data json.RawMessage) (v T, keep, last bool, err error)
	cur    T
	err    error
	done   bool
}

func newStream[T any](op string, a *answer,
	conv func(string, json.RawMessage) (T, bool, bool, error)) *Stream[T] {
	s := &Stream[T]{op: op, ans: a, conv: conv}
	if !strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") {
		// a route that answered in JSON instead (e.g. a pull already done)
		data, err := io.ReadAll(a.stream)
		a.stream.Close()
		if err != nil {
			s.err, s.done = s.readErr(err), true
		} else {
			s.single = data
		}
	} else {
		s.r = bufio.NewReader(a.stream)
	}
	return s
}

// Next reads the next event; false at the end of the stream or on an
// error (see Err).
func (s *Stream[T]) Next() bool {
	for !s.done {
		name, data, err := s.read()
		if err != nil {
			if err != io.EOF {
				s.err = err
			}
			s.Close()
			return false
		}
		v, keep, last, err := s.conv(name, data)
		if err != nil {
			s.err = fmt.Errorf("sandboxd: %s: bad %s event: %w", s.op, name, err)
			s.Close()
			return false
		}
		if last {
			s.Close()
		}
		if keep {
			s.cur = v
			return true
		}
	}
	return false
}

// Event is the event Next read.
func (s *Stream[T]) Event() T { return s.cur }

// Err is the error that ended the stream, nil at its normal end.
func (s *Stream[T]) Err() error { return s.err }

// Close drops the connection; safe to call more than once.
func (s *Stream[T]) Close() error {
	if !s.done {
		s.done = true
		if s.r != nil {
			return s.ans.stream.Close()
		}
	}
	return nil
}

// Each calls fn for every event until the stream ends, fn returns an
// error (returned as is) or the stream fails; the stream is closed after.
func (s *Stream[T]) Each(fn func(T) error) error {
	defer s.Close()
	for s.Next() {
		if err := fn(s.Event()); err != nil {
			return err
		}
	}
	return s.Err()
}

func (s *Stream[T]) readErr(err error) error {
	ctx := s.ans.ctx
	method, u := "GET", ""
	if r, ok := routes[s.op]; ok {
		method, u = r.method, r.path
	}
	switch {
	case ctx != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		err = fmt.Errorf("stream cut by its timeout: %w", context.DeadlineExceeded)
	case ctx != nil && ctx.Err() != nil:
		err = ctx.Err()
	default:
		err = fmt.Errorf("stream broken: %w", err)
	}
	return &TransportError{Op: s.op, Method: method, URL: u, Err: err}
}

// read is the next (event, data) of the SSE body: lines "event: name" and
// "data: …" up to a blank line; ":" lines are keep-alive comments.
func (s *Stream[T]) read() (string, json.RawMessage, error) {
	if s.r == nil {
		if s.single == nil {
			return "", nil, io.EOF
		}
		d := s.single
		s.single = nil
		return "json", d, nil
	}
	var event string
	var data []string
	seen := false
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" {
				return "", nil, io.EOF
			}
			if err != io.EOF {
				return "", nil, s.readErr(err)
			}
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "":
			if seen {
				name := event
				if name == "" {
					name = "message"
				}
				return name, json.RawMessage(strings.Join(data, "\n")), nil
			}
		case strings.HasPrefix(line, ":"):
			// keep-alive comment
		case strings.HasPrefix(line, "event:"):
			event, seen = strings.TrimLeft(line[6:], " "), true
		case strings.HasPrefix(line, "data:"):
			data, seen = append(data, strings.TrimPrefix(line[5:], " ")), true
		}
		if err == io.EOF {
			return "", nil, io.EOF
		}
	}
}

func decodeData(data json.RawMessage, out any) error {
	if len(data) == 0 {
		return nil
	}
	return json.Unmarshal(data, out)
}

// StreamEvent is one event of an exec or process-output stream, by Event:
//
//   - "stdout", "stderr": Chunk, and its Bytes and Text;
//   - "gap": Gap (output dropped while the client was slow, or given back);
//   - "exit": Result, the command's result (the last event);
//   - "end": Reason, the session ended under the stream (the last event).
//
// Events of other names are skipped.
type StreamEvent struct {
	Event  string
	Data   json.RawMessage // the event's JSON as sent
	Chunk  *OutputChunk
	Bytes  []byte
	Text   string
	Gap    *OutputGap
	Result *ExecResult
	Reason string
}

func execEvent(name string, data json.RawMessage) (StreamEvent, bool, bool, error) {
	ev := StreamEvent{Event: name, Data: data}
	switch name {
	case "stdout", "stderr":
		var c OutputChunk
		if err := decodeData(data, &c); err != nil {
			return ev, false, false, err
		}
		ev.Chunk = &c
		if c.DataBase64 != nil {
			ev.Bytes = DecodeOutput(*c.DataBase64, "base64")
		} else if c.Data != nil {
			ev.Bytes = []byte(*c.Data)
		}
		ev.Text = string(ev.Bytes)
		return ev, true, false, nil
	case "gap":
		var g OutputGap
		ev.Gap = &g
		return ev, true, false, decodeData(data, &g)
	case "exit":
		var r ExecResult
		ev.Result = &r
		return ev, true, true, decodeData(data, &r)
	case "end":
		var e struct {
			Reason string `json:"reason"`
		}
		err := decodeData(data, &e)
		ev.Reason = e.Reason
		return ev, true, true, err
	}
	return ev, false, false, nil
}

// WatchEvent is one event of a watch stream: "ready" first, then
// "create", "modify", "delete", "move" (From, To), "overflow" (Dropped),
// and "end" (Reason) last.
type WatchEvent struct {
	Event   string
	Type    string // the data's type, else Event
	Path    string
	Dir     bool
	From    string
	To      string
	Dropped int64
	Reason  string
	Data    json.RawMessage // the event's JSON as sent
}

func watchEvent(name string, data json.RawMessage) (WatchEvent, bool, bool, error) {
	var d struct {
		Type    string `json:"type"`
		Path    string `json:"path"`
		Dir     bool   `json:"dir"`
		From    string `json:"from"`
		To      string `json:"to"`
		Dropped int64  `json:"dropped"`
		Reason  string `json:"reason"`
	}
	err := decodeData(data, &d)
	ev := WatchEvent{Event: name, Type: d.Type, Path: d.Path, Dir: d.Dir, From: d.From, To: d.To,
		Dropped: d.Dropped, Reason: d.Reason, Data: data}
	if ev.Type == "" {
		ev.Type = name
	}
	return ev, true, name == "end", err
}
