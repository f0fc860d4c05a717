package sandboxd

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// ExecutionsService is the one-shot runs: create, get, wait, cancel,
// list, and the collected files.
type ExecutionsService struct{ t *transport }

// Create queues an execution and answers at once.  Never retried except
// on a 429/503 refusal (nothing is stored then).
func (e *ExecutionsService) Create(ctx context.Context, req *ExecutionCreateRequest) (*ExecutionCreated, error) {
	if req == nil {
		req = &ExecutionCreateRequest{}
	}
	var out ExecutionCreated
	return &out, e.t.json(ctx, &call{op: "createExecution", json: req, expect: []int{202}}, &out)
}

// Get is the execution; with wait > 0 (at most 60 s) the daemon answers
// as soon as it is final, or after wait with its current state.
func (e *ExecutionsService) Get(ctx context.Context, id string, wait time.Duration) (*Execution, error) {
	c := &call{op: "getExecution", params: map[string]string{"id": id}}
	if wait > 0 {
		if wait > time.Minute {
			wait = time.Minute
		}
		s := math.Round(wait.Seconds()*10) / 10
		c.query = query{}.str("wait_s", strconv.FormatFloat(s, 'f', -1, 64))
		c.timeout = e.t.atLeast(e.t.cfg.timeout + wait)
	}
	var out Execution
	return &out, e.t.json(ctx, c, &out)
}

// WaitOptions tune Wait: Poll is each long poll's length (default 30 s,
// at most 60 s).
type WaitOptions struct {
	Poll time.Duration
}

// Wait long-polls until the execution is final; ctx bounds the whole wait
// (a *TransportError unwrapping to context.DeadlineExceeded past it).
func (e *ExecutionsService) Wait(ctx context.Context, id string, o *WaitOptions) (*Execution, error) {
	poll := 30 * time.Second
	if o != nil && o.Poll > 0 {
		poll = o.Poll
	}
	for {
		w := poll
		if dl, ok := ctx.Deadline(); ok {
			if left := time.Until(dl); left < w {
				w = left
			}
		}
		ex, err := e.Get(ctx, id, w)
		if err != nil {
			return nil, err
		}
		if ex.Final() {
			return ex, nil
		}
	}
}

// Cancel kills a queued or running execution; its state after.
func (e *ExecutionsService) Cancel(ctx context.Context, id string) (*Execution, error) {
	var out Execution
	return &out, e.t.json(ctx, &call{op: "cancelExecution", params: map[string]string{"id": id},
		timeout: e.t.atLeast(e.t.cfg.timeout + 5*time.Second)}, &out)
}

// ListOptions select a page of a list: Status filters, Limit sizes it,
// Cursor is the previous page's NextCursor.
type ListOptions struct {
	Status string
	Limit  int
	Cursor string
}

func (o *ListOptions) query() query {
	if o == nil {
		return nil
	}
	return query{}.str("status", o.Status).num("limit", int64(o.Limit)).str("cursor", o.Cursor)
}

// List is one page of the tenant's executions, newest first.
func (e *ExecutionsService) List(ctx context.Context, o *ListOptions) (*ExecutionList, error) {
	var out ExecutionList
	return &out, e.t.json(ctx, &call{op: "listExecutions", query: o.query()}, &out)
}

// Each calls fn for every execution of the tenant, newest first, following
// the cursors, until fn returns false.
func (e *ExecutionsService) Each(ctx context.Context, o *ListOptions, fn func(*Execution) bool) error {
	return eachItem(o, fn, func(lo *ListOptions) ([]Execution, *string, error) {
		page, err := e.List(ctx, lo)
		if err != nil {
			return nil, nil, err
		}
		return page.Executions, page.NextCursor, nil
	})
}

// eachItem walks the items of a cursor-paged list (pages of 200 unless
// o.Limit says otherwise) until fn returns false.
func eachItem[T any](o *ListOptions, fn func(*T) bool,
	page func(*ListOptions) (items []T, next *string, err error)) error {
	lo := ListOptions{}
	if o != nil {
		lo = *o
	}
	if lo.Limit == 0 {
		lo.Limit = 200
	}
	for {
		items, next, err := page(&lo)
		if err != nil {
			return err
		}
		for i := range items {
			if !fn(&items[i]) {
				return nil
			}
		}
		if next == nil || *next == "" {
			return nil
		}
		lo.Cursor = *next
	}
}

// Download is a collected file's bytes (path: one of Execution.Files).
func (e *ExecutionsService) Download(ctx context.Context, id, path string) ([]byte, error) {
	return e.t.bytes(ctx, &call{op: "getExecutionFile", params: map[string]string{"id": id},
		query: query{}.str("path", path), accept: "*/*"})
}

// jsonObject decodes b into out, reporting success.
func jsonObject(b []byte, out any) bool { return json.Unmarshal(b, out) == nil }
