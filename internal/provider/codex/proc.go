package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/provider"
)

// proc is one app-server process; its Shared record holds the runtimes whose threads it
// serves: one runtime for a session of its own, every member room's on a Shared host, routed
// by thread id.
type proc struct {
	child *provider.Child
	c     *conn
	log   *slog.Logger
	s     *provider.Shared[*Runtime, *proc]
}

// shared holds the live Shared-host processes of this worker, by runtime host.
var shared provider.SharedPool[*Runtime, *proc]

// attach gives r the process its thread runs on: a new one of its own, or its Shared host's
// (started and initialized by the first member; later members wait for that).
func (r *Runtime) attach(ctx context.Context) (*proc, error) {
	log := r.log
	if key := r.spec.SharedHost; key != uuid.Nil {
		log = log.With("runtime_host", key)
	}
	s, err := shared.Attach(ctx, r.spec.SharedHost, r, func(s *provider.Shared[*Runtime, *proc]) error {
		p := &proc{log: log, s: s}
		if err := p.start(ctx, r); err != nil {
			return err
		}
		s.Proc = p
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.Proc, nil
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
	for _, r := range p.s.Exited() {
		r.closeOnce.Do(func() { close(r.exited) })
	}
}

// register routes a thread's notifications and requests to its runtime.
func (p *proc) register(thread string, r *Runtime) { p.s.Register(thread, r) }

// release detaches a runtime; the last one out stops the process.
func (p *proc) release(r *Runtime) {
	if p.s.Release(r) && p.child != nil {
		p.child.Kill(provider.ChildShutdownGrace)
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
	r, _ := p.s.Route(head.ThreadID)
	return r
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
