package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/jam-dev/jam/internal/provider"
)

// writer serializes the lines Jam writes to claude's stdin.
type writer struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// line writes v as one JSON line; after a failed write every later one fails too.
func (w *writer) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if _, err := w.w.Write(append(b, '\n')); err != nil {
		w.err = fmt.Errorf("write to claude: %w", err)
		return w.err
	}
	return nil
}

func (w *writer) broken() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err != nil
}

// errChildGone: claude exited before it answered.
var errChildGone = errors.New("claude exited")

// controlAnswer is claude's answer to one of Jam's control requests.
type controlAnswer struct {
	ok       bool
	errText  string
	response json.RawMessage
}

// userLine is one user message for claude.
func userLine(text string) map[string]any {
	return map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text},
		"parent_tool_use_id": nil, "session_id": "default"}
}

// control sends a control request and waits for its answer (decoded into out when set).
func (r *Runtime) control(ctx context.Context, request map[string]any, out any) error {
	r.mu.Lock()
	if r.child == nil || !r.child.Alive() {
		r.mu.Unlock()
		return errChildGone
	}
	r.nextID++
	id := "jam_" + strconv.Itoa(r.nextID)
	ch := make(chan controlAnswer, 1)
	r.controls[id] = ch
	w := r.w
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.controls, id)
		r.mu.Unlock()
	}()
	if err := w.line(map[string]any{"type": "control_request", "request_id": id, "request": request}); err != nil {
		return err
	}
	select {
	case a, ok := <-ch:
		switch {
		case !ok:
			return fmt.Errorf("%v: %w", request["subtype"], errChildGone)
		case !a.ok:
			return fmt.Errorf("%v refused: %s", request["subtype"], a.errText)
		case out != nil && len(a.response) > 0:
			return json.Unmarshal(a.response, out)
		}
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// respond answers one of claude's control requests.
func (r *Runtime) respond(id string, response any) {
	r.mu.Lock()
	w := r.w
	r.mu.Unlock()
	err := w.line(map[string]any{"type": "control_response",
		"response": map[string]any{"subtype": "success", "request_id": id, "response": response}})
	if err != nil {
		r.Log.Debug("answer to claude not written", "request_id", id, "error", err)
	}
}

// refuse answers one of claude's control requests with an error.
func (r *Runtime) refuse(id, why string) {
	r.mu.Lock()
	w := r.w
	r.mu.Unlock()
	_ = w.line(map[string]any{"type": "control_response",
		"response": map[string]any{"subtype": "error", "request_id": id, "error": why}})
}

// line is the envelope of every line claude writes.
type line struct {
	Type string `json:"type"`
	// control_response
	Response *struct {
		Subtype   string          `json:"subtype"`
		RequestID string          `json:"request_id"`
		Response  json.RawMessage `json:"response"`
		Error     string          `json:"error"`
	} `json:"response"`
	// control_request, control_cancel_request
	RequestID string          `json:"request_id"`
	Request   json.RawMessage `json:"request"`
	// system
	Subtype string `json:"subtype"`
	// user (a replay of Jam's line, or tool results), assistant
	IsReplay bool            `json:"isReplay"`
	Message  json.RawMessage `json:"message"`
	// stream_event
	Event json.RawMessage `json:"event"`
	// parent_tool_use_id is set on a subagent's lines.
	ParentToolUseID *string `json:"parent_tool_use_id"`
}

// read dispatches claude's stdout until it ends. A line too long or not JSON is logged and
// skipped.
func (r *Runtime) read(src io.Reader) {
	lr := provider.NewLineReader(src, provider.MaxProtocolLine)
	for {
		raw, err := lr.Next()
		var g *provider.Garbage
		if errors.As(err, &g) {
			r.Log.Warn("claude sent a line Jam skips", "reason", g.Reason, "bytes", g.Bytes, "prefix", g.Prefix)
			continue
		}
		if err != nil {
			return
		}
		var l line
		if err := json.Unmarshal(raw, &l); err != nil {
			continue
		}
		switch l.Type {
		case "control_response":
			r.controlResponse(l)
		case "control_request":
			r.controlRequest(l.RequestID, l.Request)
		case "control_cancel_request":
			r.mu.Lock()
			if cancel, ok := r.asks[l.RequestID]; ok {
				cancel()
			}
			r.mu.Unlock()
		default:
			r.output(l, raw)
		}
	}
}

func (r *Runtime) controlResponse(l line) {
	if l.Response == nil {
		return
	}
	r.mu.Lock()
	ch, ok := r.controls[l.Response.RequestID]
	delete(r.controls, l.Response.RequestID)
	r.mu.Unlock()
	if !ok {
		return
	}
	ch <- controlAnswer{ok: l.Response.Subtype == "success", errText: l.Response.Error, response: l.Response.Response}
}

// controlRequest answers claude's requests: tool permissions through the broker; Jam
// installs no hooks and serves no in-process MCP server, so anything else is refused.
func (r *Runtime) controlRequest(id string, raw json.RawMessage) {
	var head struct {
		Subtype string `json:"subtype"`
	}
	_ = json.Unmarshal(raw, &head)
	switch head.Subtype {
	case "can_use_tool":
		go r.canUseTool(id, raw)
	default:
		r.Log.Debug("claude control request refused", "subtype", head.Subtype)
		r.refuse(id, "Jam does not handle "+head.Subtype)
	}
}
