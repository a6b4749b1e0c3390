package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/provider"
)

// proc is one app-server process and the runtimes whose threads it serves: one runtime for
// a session of its own, every member room's on a Shared host, routed by thread id.
type proc struct {
	key   uuid.UUID // the Shared host; zero for a session's own process
	child *provider.Child
	c     *conn
	log   *slog.Logger

	mu      sync.Mutex
	threads map[string]*Runtime
	members map[*Runtime]bool
	dead    bool
	// ready is closed once the process answered initialize (err says whether it did).
	ready chan struct{}
	err   error
}

// shared holds the live Shared-host processes of this worker, by runtime host.
var shared = struct {
	mu    sync.Mutex
	procs map[uuid.UUID]*proc
}{procs: map[uuid.UUID]*proc{}}

// attach gives r the process its thread runs on: a new one of its own, or its Shared host's
// (started and initialized by the first member; later members wait for that).
func (r *Runtime) attach(ctx context.Context) (*proc, error) {
	key := r.spec.SharedHost
	if key == uuid.Nil {
		p := newProc(key, r.log)
		p.members[r] = true
		err := p.start(ctx, r)
		close(p.ready)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	shared.mu.Lock()
	p, ok := shared.procs[key]
	if ok {
		p.mu.Lock()
		ok = !p.dead
		if ok {
			p.members[r] = true
		}
		p.mu.Unlock()
	}
	if ok {
		shared.mu.Unlock()
		select {
		case <-p.ready:
		case <-ctx.Done():
			p.release(r)
			return nil, fmt.Errorf("wait for the shared app-server: %w", context.Cause(ctx))
		}
		if p.err != nil {
			p.release(r)
			return nil, p.err
		}
		return p, nil
	}
	p = newProc(key, r.log.With("runtime_host", key))
	p.members[r] = true
	shared.procs[key] = p
	shared.mu.Unlock()
	p.err = p.start(ctx, r)
	close(p.ready)
	if p.err != nil {
		p.release(r)
		return nil, p.err
	}
	return p, nil
}

func newProc(key uuid.UUID, log *slog.Logger) *proc {
	return &proc{key: key, log: log, threads: map[string]*Runtime{}, members: map[*Runtime]bool{}, ready: make(chan struct{})}
}

// start spawns the app-server with r's spec and initializes it; a process that fails is
// killed.
func (p *proc) start(ctx context.Context, r *Runtime) error {
	spawner := r.spec.Spawner
	if spawner == nil {
		spawner = provider.DefaultSpawner
	}
	child, err := spawner.Spawn(ctx, provider.Command{Path: r.spec.Executable, Args: r.spec.Args, Env: r.spec.Env,
		Dir: r.spec.Dir, Stderr: r.stderr})
	if err != nil {
		return fmt.Errorf("spawn codex app-server: %w", err)
	}
	p.child, p.c = child, newConn(child.Stdin, p.log)
	p.c.onNotify, p.c.onRequest = p.notify, p.request
	child.OnExit(p.exited)
	go p.c.serve(provider.GuardJSONLines(child.Stdout, provider.MaxProtocolLine, p.log))
	err = p.c.call(ctx, "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "jam", "title": "Jam", "version": ClientVersion},
		"capabilities": map[string]any{"experimentalApi": true}, // dynamic tools need it
	}, nil)
	if err == nil {
		if err = p.c.notify("initialized", nil); err != nil {
			err = fmt.Errorf("initialized: %w", err)
		}
	}
	if err != nil {
		child.Kill(provider.ChildShutdownGrace)
		return err
	}
	return nil
}

// exited runs once the process is gone: every member's runtime has exited with it.
func (p *proc) exited() {
	p.mu.Lock()
	p.dead = true
	members := make([]*Runtime, 0, len(p.members))
	for r := range p.members {
		members = append(members, r)
	}
	p.mu.Unlock()
	p.forget()
	for _, r := range members {
		r.closeOnce.Do(func() { close(r.exited) })
	}
}

// forget drops a Shared process from the pool (a later member starts a new one).
func (p *proc) forget() {
	if p.key == uuid.Nil {
		return
	}
	shared.mu.Lock()
	if shared.procs[p.key] == p {
		delete(shared.procs, p.key)
	}
	shared.mu.Unlock()
}

// register routes a thread's notifications and requests to its runtime.
func (p *proc) register(thread string, r *Runtime) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.threads[thread] = r
}

// release detaches a runtime; the last one out stops the process.
func (p *proc) release(r *Runtime) {
	p.mu.Lock()
	delete(p.members, r)
	for t, m := range p.threads {
		if m == r {
			delete(p.threads, t)
		}
	}
	last := len(p.members) == 0
	child := p.child
	p.mu.Unlock()
	if !last {
		return
	}
	p.forget()
	if child != nil {
		child.Kill(provider.ChildShutdownGrace)
	}
}

// route finds the runtime of a message's thread.
func (p *proc) route(raw json.RawMessage) *Runtime {
	var head struct {
		ThreadID string `json:"threadId"`
	}
	if json.Unmarshal(raw, &head) != nil || head.ThreadID == "" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.threads[head.ThreadID]
}

func (p *proc) notify(method string, raw json.RawMessage) {
	if r := p.route(raw); r != nil {
		r.notification(method, raw)
	}
}

func (p *proc) request(method string, raw json.RawMessage) (any, *rpcError) {
	r := p.route(raw)
	if r == nil {
		return nil, &rpcError{Code: -32602, Message: "no Jam room has this thread"}
	}
	return r.serverRequest(method, raw)
}
