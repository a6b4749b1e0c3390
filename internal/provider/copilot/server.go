package copilot

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// server is one SDK-server process; its Shared record holds the runtimes whose sessions it
// serves: one runtime for a session of its own, every member room's on a Shared host,
// routed by session id.
type server struct {
	child *provider.Child
	c     *conn
	log   *slog.Logger
	// version is what the server reported at connect.
	version string
	s       *provider.Shared[*Runtime, *server]
}

// shared holds the live Shared-host servers of this worker, by runtime host.
var shared provider.SharedPool[*Runtime, *server]

// attach gives r the server its session runs on: a new one of its own, or its Shared
// host's (started and connected by the first member; later members wait for that).
func (r *Runtime) attach(ctx context.Context) (*server, error) {
	log := r.log
	if key := r.spec.SharedHost; key != uuid.Nil {
		log = log.With("runtime_host", key)
	}
	s, err := shared.Attach(ctx, r.spec.SharedHost, r, func(s *provider.Shared[*Runtime, *server]) error {
		srv := &server{log: log, s: s}
		if err := srv.start(ctx, r); err != nil {
			return err
		}
		s.Proc = srv
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.Proc, nil
}

// start spawns the server with r's spec and connects, refusing a protocol version Jam does
// not speak; a server that fails is killed.
func (s *server) start(ctx context.Context, r *Runtime) error {
	spawner := r.spec.Spawner
	if spawner == nil {
		spawner = provider.DefaultSpawner
	}
	child, err := spawner.Spawn(ctx, provider.Command{Path: r.spec.Executable, Args: r.spec.Args, Env: r.spec.Env,
		Dir: r.spec.Dir, Stderr: r.stderr})
	if err != nil {
		return fmt.Errorf("spawn copilot: %w", err)
	}
	s.child, s.c = child, newConn(child.Stdin, s.log)
	s.c.onNotify = s.notify
	child.OnExit(s.exited)
	go s.c.serve(child.Stdout)
	var hello struct {
		ProtocolVersion int    `json:"protocolVersion"`
		Version         string `json:"version"`
	}
	err = s.c.call(ctx, "connect", map[string]any{}, &hello)
	if err == nil && hello.ProtocolVersion != ProtocolVersion {
		err = fmt.Errorf("%w: copilot %s speaks SDK protocol %d, Jam speaks %d; install a Copilot CLI that speaks %d",
			ErrProtocolVersion, domain.Truncate(hello.Version, 100), hello.ProtocolVersion, ProtocolVersion, ProtocolVersion)
	}
	if err != nil {
		child.Kill(provider.ChildShutdownGrace)
		return err
	}
	s.version = domain.Truncate(hello.Version, 100)
	return nil
}

// exited runs once the process is gone: every member's runtime has exited with it.
func (s *server) exited() {
	for _, r := range s.s.Exited() {
		r.closeOnce.Do(func() { close(r.exited) })
	}
}

// register routes a session's events to its runtime.
func (s *server) register(session string, r *Runtime) { s.s.Register(session, r) }

// release detaches a runtime; the last one out stops the process.
func (s *server) release(r *Runtime) {
	if s.s.Release(r) && s.child != nil {
		s.child.Kill(provider.ChildShutdownGrace)
	}
}

// notify routes a session.event to the runtime of its session.
func (s *server) notify(method string, raw json.RawMessage) {
	if method != "session.event" {
		s.log.Debug("copilot notification ignored", "method", method)
		return
	}
	var head struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(raw, &head) != nil || head.SessionID == "" {
		return
	}
	if r, ok := s.s.Route(head.SessionID); ok {
		r.notification(raw)
	}
}
