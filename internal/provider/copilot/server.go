package copilot

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// server is one SDK-server process and the runtimes whose sessions it serves: one runtime
// for a session of its own, every member room's on a Shared host, routed by session id.
type server struct {
	key   uuid.UUID // the Shared host; zero for a session's own process
	child *provider.Child
	c     *conn
	log   *slog.Logger
	// version is what the server reported at connect.
	version string

	mu       sync.Mutex
	sessions map[string]*Runtime
	members  map[*Runtime]bool
	dead     bool
	// ready is closed once the server answered connect (err says whether it did).
	ready chan struct{}
	err   error
}

// shared holds the live Shared-host servers of this worker, by runtime host.
var shared = struct {
	mu      sync.Mutex
	servers map[uuid.UUID]*server
}{servers: map[uuid.UUID]*server{}}

// attach gives r the server its session runs on: a new one of its own, or its Shared
// host's (started and connected by the first member; later members wait for that).
func (r *Runtime) attach(ctx context.Context) (*server, error) {
	key := r.spec.SharedHost
	if key == uuid.Nil {
		s := newServer(key, r.log)
		s.members[r] = true
		err := s.start(ctx, r)
		close(s.ready)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	shared.mu.Lock()
	s, ok := shared.servers[key]
	if ok {
		s.mu.Lock()
		ok = !s.dead
		if ok {
			s.members[r] = true
		}
		s.mu.Unlock()
	}
	if ok {
		shared.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			s.release(r)
			return nil, fmt.Errorf("wait for the shared copilot server: %w", context.Cause(ctx))
		}
		if s.err != nil {
			s.release(r)
			return nil, s.err
		}
		return s, nil
	}
	s = newServer(key, r.log.With("runtime_host", key))
	s.members[r] = true
	shared.servers[key] = s
	shared.mu.Unlock()
	s.err = s.start(ctx, r)
	close(s.ready)
	if s.err != nil {
		s.release(r)
		return nil, s.err
	}
	return s, nil
}

func newServer(key uuid.UUID, log *slog.Logger) *server {
	return &server{key: key, log: log, sessions: map[string]*Runtime{}, members: map[*Runtime]bool{}, ready: make(chan struct{})}
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
	s.mu.Lock()
	s.dead = true
	members := make([]*Runtime, 0, len(s.members))
	for r := range s.members {
		members = append(members, r)
	}
	s.mu.Unlock()
	s.forget()
	for _, r := range members {
		r.closeOnce.Do(func() { close(r.exited) })
	}
}

// forget drops a Shared server from the pool (a later member starts a new one).
func (s *server) forget() {
	if s.key == uuid.Nil {
		return
	}
	shared.mu.Lock()
	if shared.servers[s.key] == s {
		delete(shared.servers, s.key)
	}
	shared.mu.Unlock()
}

// register routes a session's events to its runtime.
func (s *server) register(session string, r *Runtime) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions[session] = r
}

// release detaches a runtime; the last one out stops the process.
func (s *server) release(r *Runtime) {
	s.mu.Lock()
	delete(s.members, r)
	for id, m := range s.sessions {
		if m == r {
			delete(s.sessions, id)
		}
	}
	last := len(s.members) == 0
	child := s.child
	s.mu.Unlock()
	if !last {
		return
	}
	s.forget()
	if child != nil {
		child.Kill(provider.ChildShutdownGrace)
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
	s.mu.Lock()
	r := s.sessions[head.SessionID]
	s.mu.Unlock()
	if r != nil {
		r.notification(raw)
	}
}
