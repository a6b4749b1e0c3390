package copilot

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider/jsonrpc"
)

// server is one SDK-server process: a session's own, or its Shared host's, whose member
// rooms' sessions it serves, routed by session id.
type server = jsonrpc.Process[*Runtime]

// shared holds the live SDK-server processes of this worker, by runtime host.
var shared jsonrpc.Pool[*Runtime]

// attach gives r the server its session runs on: a new one of its own, or its Shared
// host's (started and connected by the first member; later members wait for that).
func (r *Runtime) attach(ctx context.Context) error {
	// The session configuration is checked (the model provider's key) before anything
	// starts: a missing credential is the answer, not a slow start.
	cfg, err := r.sessionConfig()
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.cfg = cfg
	r.mu.Unlock()
	srv, err := shared.Attach(ctx, r.Spec.SharedHost, r, r.Log, func(s *server) error { return r.startServer(ctx, s) })
	if err != nil {
		return err
	}
	r.srv.Set(srv)
	r.mu.Lock()
	r.version = srv.Version
	r.mu.Unlock()
	return nil
}

// startServer spawns the server with r's spec and connects, refusing a protocol version
// Jam does not speak.
func (r *Runtime) startServer(ctx context.Context, s *server) error {
	child, err := r.Spawn(ctx, r.Spec.Args)
	if err != nil {
		return err
	}
	// JSON-RPC 2.0 framed the LSP way. The server's own requests are declined: everything
	// Jam handles arrives as session events answered by Jam's own requests.
	s.Open(child, jsonrpc.Options{Framing: jsonrpc.ContentLength, Peer: "copilot server",
		Handlers: jsonrpc.Handlers{Notify: func(method string, raw json.RawMessage) { notify(s, method, raw) }}})
	var hello struct {
		ProtocolVersion int    `json:"protocolVersion"`
		Version         string `json:"version"`
	}
	if err := s.Conn.Call(ctx, "connect", map[string]any{}, &hello); err != nil {
		return err
	}
	if hello.ProtocolVersion != ProtocolVersion {
		return fmt.Errorf("%w: copilot %s speaks SDK protocol %d, Jam speaks %d; install a Copilot CLI that speaks %d",
			ErrProtocolVersion, domain.Truncate(hello.Version, 100), hello.ProtocolVersion, ProtocolVersion, ProtocolVersion)
	}
	s.Version = domain.Truncate(hello.Version, 100)
	return nil
}

// notify routes a session.event to the runtime of its session.
func notify(s *server, method string, raw json.RawMessage) {
	if method != "session.event" {
		s.Log.Debug("copilot notification ignored", "method", method)
		return
	}
	var head struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(raw, &head) != nil || head.SessionID == "" {
		return
	}
	if r, ok := s.Route(head.SessionID); ok {
		r.notification(raw)
	}
}
