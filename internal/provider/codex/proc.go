package codex

import (
	"context"
	"encoding/json"

	"github.com/jam-dev/jam/internal/provider/jsonrpc"
)

// proc is one app-server process: a session's own, or its Shared host's, whose member rooms'
// threads it serves, routed by thread id.
type proc = jsonrpc.Process[*Runtime]

// shared holds the live app-server processes of this worker, by runtime host.
var shared jsonrpc.Pool[*Runtime]

// attach gives r the process its thread runs on: a new one of its own, or its Shared host's
// (started and initialized by the first member; later members wait for that).
func (r *Runtime) attach(ctx context.Context) error {
	p, err := shared.Attach(ctx, r.Spec.SharedHost, r, r.Log, func(p *proc) error { return r.startProc(ctx, p) })
	if err != nil {
		return err
	}
	r.proc.Set(p)
	return nil
}

// startProc spawns the app-server with r's spec and initializes it.
func (r *Runtime) startProc(ctx context.Context, p *proc) error {
	child, err := r.Spawn(ctx, r.Spec.Args)
	if err != nil {
		return err
	}
	// Codex speaks JSON-RPC 2.0 shapes without the "jsonrpc" member, one message a line; its
	// requests (tool calls, approvals) are answered by the runtime of their thread.
	p.Open(child, jsonrpc.Options{Framing: jsonrpc.Lines, OmitVersion: true, Peer: "codex app-server",
		Handlers: jsonrpc.Handlers{
			Notify: func(method string, raw json.RawMessage) {
				if r := route(p, raw); r != nil {
					r.notification(method, raw)
				}
			},
			Request: func(method string, raw json.RawMessage) (any, *jsonrpc.Error) {
				r := route(p, raw)
				if r == nil {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no Jam room has this thread"}
				}
				return r.serverRequest(method, raw)
			},
		}})
	err = p.Conn.Call(ctx, "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "jam", "title": "Jam", "version": ClientVersion},
		"capabilities": map[string]any{"experimentalApi": true}, // dynamic tools need it
	}, nil)
	if err != nil {
		return err
	}
	return p.Conn.Notify("initialized", nil)
}

// route finds the runtime of a message's thread.
func route(p *proc, raw json.RawMessage) *Runtime {
	var head struct {
		ThreadID string `json:"threadId"`
	}
	if json.Unmarshal(raw, &head) != nil || head.ThreadID == "" {
		return nil
	}
	r, _ := p.Route(head.ThreadID)
	return r
}
