package sandboxd

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ImagesService is the image store: list, pull (admin), delete, gc.
type ImagesService struct{ t *transport }

// List is the stored images.
func (im *ImagesService) List(ctx context.Context) ([]Image, error) {
	var out struct {
		Images []Image `json:"images"`
	}
	err := im.t.json(ctx, &call{op: "listImages"}, &out)
	return out.Images, err
}

const pullTimeout = 30 * time.Minute

// Pull pulls an image from its registry into the store (admin key).  With
// onProgress the pull is streamed and onProgress gets each blob's
// progress; blobs already stored send none.
func (im *ImagesService) Pull(ctx context.Context, ref string, onProgress func(PullProgress)) (*PulledImage, error) {
	c := &call{op: "pullImage", json: map[string]string{"ref": ref}, timeout: im.t.atLeast(pullTimeout)}
	var out PulledImage
	if onProgress == nil {
		return &out, im.t.json(ctx, c, &out)
	}
	c.stream = true
	a, err := im.t.send(ctx, c)
	if err != nil {
		return nil, err
	}
	type event struct {
		name string
		data json.RawMessage
	}
	st := newStream("pullImage", a, func(name string, data json.RawMessage) (event, bool, bool, error) {
		return event{name, data}, true, name == "done" || name == "json" || name == "error", nil
	})
	defer st.Close()
	for st.Next() {
		data := st.Event().data
		switch st.Event().name {
		case "progress":
			var p PullProgress
			if err := decodeData(data, &p); err != nil {
				return nil, fmt.Errorf("sandboxd: pull of %s: bad progress event: %w", ref, err)
			}
			onProgress(p)
		case "done", "json":
			return &out, decodeData(data, &out)
		case "error":
			var e struct {
				Code string `json:"code"`
			}
			_ = json.Unmarshal(data, &e)
			status := 500
			if e.Code == "bad_gateway" {
				status = 502
			}
			body, _ := json.Marshal(map[string]json.RawMessage{"error": data})
			return nil, errorFromBody(status, body, 0, a.header.Get("X-Request-Id"))
		}
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("sandboxd: pull of %s: stream ended without done or error", ref)
}

// Delete removes an image reference from the store (admin key).
func (im *ImagesService) Delete(ctx context.Context, ref string) error {
	_, err := im.t.send(ctx, &call{op: "deleteImage", params: map[string]string{"ref*": ref},
		expect: []int{204}})
	return err
}

// GC removes unreferenced blobs (admin key); counts of what it removed.
func (im *ImagesService) GC(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	return out, im.t.json(ctx, &call{op: "collectImageGarbage"}, &out)
}

// AuditService is the tamper-evident audit log.
type AuditService struct{ t *transport }

// AuditListOptions select audit events: of a Tenant (admin), of an
// Action, with seq > After, at most Limit (default 100, at most 1000).
type AuditListOptions struct {
	Tenant int64
	Action string
	After  int64
	Limit  int
}

// List is one page of audit events, oldest first; a tenant key sees its
// own.
func (a *AuditService) List(ctx context.Context, o *AuditListOptions) (*AuditPage, error) {
	if o == nil {
		o = &AuditListOptions{}
	}
	q := query{}.num("tenant", o.Tenant).str("action", o.Action).num("after", o.After).
		num("limit", int64(o.Limit))
	var out AuditPage
	return &out, a.t.json(ctx, &call{op: "listAuditEvents", query: q}, &out)
}

// Each calls fn for every audit event from o.After on, following the
// cursors, until fn returns false.
func (a *AuditService) Each(ctx context.Context, o *AuditListOptions, fn func(*AuditEvent) bool) error {
	lo := AuditListOptions{Limit: 1000}
	if o != nil {
		lo = *o
		lo.Limit = 1000
	}
	for {
		page, err := a.List(ctx, &lo)
		if err != nil {
			return err
		}
		for i := range page.Events {
			if !fn(&page.Events[i]) {
				return nil
			}
		}
		if page.NextCursor == nil {
			return nil
		}
		lo.After = *page.NextCursor
	}
}

// Verify checks the audit chain (admin key).
func (a *AuditService) Verify(ctx context.Context) (*AuditVerdict, error) {
	var out AuditVerdict
	return &out, a.t.json(ctx, &call{op: "verifyAudit", timeout: a.t.atLeast(5 * time.Minute)}, &out)
}
