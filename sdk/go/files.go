package sandboxd

import (
	"context"
	"time"
)

// FilesService is a session's files (paths absolute, or relative to /work).
type FilesService struct {
	t   *transport
	sid string
}

func (f *FilesService) call(op string, q query) *call {
	return &call{op: op, params: map[string]string{"id": f.sid}, query: q}
}

// Put writes a file (its parent directories made as needed).
func (f *FilesService) Put(ctx context.Context, path string, data []byte) (*FileWritten, error) {
	if data == nil {
		data = []byte{}
	}
	c := f.call("writeSessionFile", query{}.str("path", path))
	c.body, c.expect = data, []int{201}
	var out FileWritten
	return &out, f.t.json(ctx, c, &out)
}

// Get reads a file.
func (f *FilesService) Get(ctx context.Context, path string) ([]byte, error) {
	c := f.call("readSessionFile", query{}.str("path", path))
	c.accept = "*/*"
	return f.t.bytes(ctx, c)
}

// ReadText reads a file as text.
func (f *FilesService) ReadText(ctx context.Context, path string) (string, error) {
	b, err := f.Get(ctx, path)
	return string(b), err
}

// DirOptions tune List: Recursive, down to MaxDepth levels (0: the daemon's default).
type DirOptions struct {
	Recursive bool
	MaxDepth  int
}

// List lists a directory (o may be nil).
func (f *FilesService) List(ctx context.Context, path string, o *DirOptions) ([]DirEntry, error) {
	if o == nil {
		o = &DirOptions{}
	}
	q := query{}.str("path", path).flag("list", true).flag("recursive", o.Recursive).
		num("max_depth", int64(o.MaxDepth))
	var out DirListing
	err := f.t.json(ctx, f.call("readSessionFile", q), &out)
	return out.Entries, err
}

// Stat is one file's metadata.
func (f *FilesService) Stat(ctx context.Context, path string) (*FileStat, error) {
	var out FileStat
	return &out, f.t.json(ctx, f.call("readSessionFile", query{}.str("path", path).flag("stat", true)), &out)
}

// Delete removes a file or a directory tree.
func (f *FilesService) Delete(ctx context.Context, path string) error {
	c := f.call("deleteSessionFile", query{}.str("path", path))
	c.expect = []int{204}
	_, err := f.t.send(ctx, c)
	return err
}

// MkdirOptions tune Mkdir: Parents makes missing parents, Mode is octal ("0750").
type MkdirOptions struct {
	Parents bool
	Mode    string
}

// Mkdir makes a directory (o may be nil).
func (f *FilesService) Mkdir(ctx context.Context, path string, o *MkdirOptions) (*FileStat, error) {
	if o == nil {
		o = &MkdirOptions{}
	}
	q := query{}.str("path", path).flag("parents", o.Parents).str("mode", o.Mode)
	var out FileStat
	return &out, f.t.json(ctx, f.call("makeSessionDirectory", q), &out)
}

// Move renames a file or directory; overwrite replaces an existing target.
func (f *FilesService) Move(ctx context.Context, from, to string, overwrite bool) (*FileStat, error) {
	c := f.call("moveSessionFile", nil)
	c.json = FileMove{From: from, To: to, Overwrite: overwrite}
	var out FileStat
	return &out, f.t.json(ctx, c, &out)
}

// ArchiveOptions bound an archive's size (0: the daemon's defaults).
type ArchiveOptions struct {
	MaxEntries int
	MaxBytes   int64
}

func (o *ArchiveOptions) query(path string) query {
	q := query{}.str("path", path)
	if o != nil {
		q.num("max_entries", int64(o.MaxEntries)).num("max_bytes", o.MaxBytes)
	}
	return q
}

// Archive is the tree under path as a tar (o may be nil).
func (f *FilesService) Archive(ctx context.Context, path string, o *ArchiveOptions) ([]byte, error) {
	c := f.call("getSessionArchive", o.query(path))
	c.accept = "application/x-tar"
	return f.t.bytes(ctx, c)
}

// Extract unpacks a tar (optionally gzip, bzip2 or xz compressed)
// into the directory path (o may be nil).
func (f *FilesService) Extract(ctx context.Context, path string, tar []byte, o *ArchiveOptions) (*ArchiveExtracted, error) {
	c := f.call("putSessionArchive", o.query(path))
	c.body, c.contentType, c.expect = tar, "application/x-tar", []int{201}
	var out ArchiveExtracted
	return &out, f.t.json(ctx, c, &out)
}

// Watch streams the file events under a directory: "ready" once the
// watches are in place, then "create" / "modify" / "delete" / "move",
// "overflow", and "end".  Close the stream (or cancel ctx) to stop.
func (f *FilesService) Watch(ctx context.Context, path string, recursive bool) (*Stream[WatchEvent], error) {
	c := f.call("watchSessionFiles", query{}.str("path", path).flag("recursive", recursive))
	c.stream = true
	a, err := f.t.send(ctx, c)
	if err != nil {
		return nil, err
	}
	return newStream("watchSessionFiles", a, watchEvent), nil
}

// ContextsService is a session's stateful interpreters (python, node).
type ContextsService struct {
	t   *transport
	sid string
}

func (cs *ContextsService) call(op, cid string) *call {
	p := map[string]string{"id": cs.sid}
	if cid != "" {
		p["cid"] = cid
	}
	return &call{op: op, params: p}
}

// Create starts an interpreter ("python" or "node").
func (cs *ContextsService) Create(ctx context.Context, language string) (*ContextHandle, error) {
	c := cs.call("createContext", "")
	c.json, c.expect, c.timeout = ContextCreate{Language: language}, []int{201}, cs.t.atLeast(startTimeout)
	var info Context
	if err := cs.t.json(ctx, c, &info); err != nil {
		return nil, err
	}
	return &ContextHandle{Info: &info, cs: cs}, nil
}

// List is the session's contexts.
func (cs *ContextsService) List(ctx context.Context) ([]Context, error) {
	var out struct {
		Contexts []Context `json:"contexts"`
	}
	err := cs.t.json(ctx, cs.call("listContexts", ""), &out)
	return out.Contexts, err
}

// Get is one context's state.
func (cs *ContextsService) Get(ctx context.Context, cid string) (*Context, error) {
	var out Context
	return &out, cs.t.json(ctx, cs.call("getContext", cid), &out)
}

// Run runs code in the context and waits for its result; timeoutS bounds
// the run (0: the daemon's default).
func (cs *ContextsService) Run(ctx context.Context, cid, code string, timeoutS int) (*ContextRunResult, error) {
	c := cs.call("runInContext", cid)
	ts := timeoutS
	if ts == 0 {
		ts = 300
	}
	c.json, c.timeout = ContextRunRequest{Code: code, TimeoutS: timeoutS},
		cs.t.atLeast(time.Duration(ts+30)*time.Second)
	var out ContextRunResult
	return &out, cs.t.json(ctx, c, &out)
}

// Restart restarts the interpreter (its state is lost).
func (cs *ContextsService) Restart(ctx context.Context, cid string) (*Context, error) {
	c := cs.call("restartContext", cid)
	c.timeout = cs.t.atLeast(startTimeout)
	var out Context
	return &out, cs.t.json(ctx, c, &out)
}

// Delete stops the interpreter.
func (cs *ContextsService) Delete(ctx context.Context, cid string) error {
	c := cs.call("deleteContext", cid)
	c.expect = []int{204}
	_, err := cs.t.send(ctx, c)
	return err
}

// ContextHandle is a handle on a context: its last known state in Info.
type ContextHandle struct {
	Info *Context
	cs   *ContextsService
}

// ID is the context's id.
func (h *ContextHandle) ID() string { return h.Info.ID }

// Run runs code in it (see ContextsService.Run).
func (h *ContextHandle) Run(ctx context.Context, code string, timeoutS int) (*ContextRunResult, error) {
	return h.cs.Run(ctx, h.ID(), code, timeoutS)
}

// Restart restarts it; Info is the state after.
func (h *ContextHandle) Restart(ctx context.Context) error {
	info, err := h.cs.Restart(ctx, h.ID())
	if err == nil {
		h.Info = info
	}
	return err
}

// Refresh reads its current state into Info.
func (h *ContextHandle) Refresh(ctx context.Context) error {
	info, err := h.cs.Get(ctx, h.ID())
	if err == nil {
		h.Info = info
	}
	return err
}

// Delete stops it.
func (h *ContextHandle) Delete(ctx context.Context) error { return h.cs.Delete(ctx, h.ID()) }
