// Package codex is the provider.Runtime of `codex app-server` (OpenAI Codex): one app-server
// child per runtime session (one per Shared host, its member rooms routed by thread id), one
// Codex thread bound to each session (thread/start, or thread/resume of
// the bound thread, never a silent fresh one), one Codex turn per Jam turn, steering with
// turn/steer, Jam's tool registry as dynamic tools (settlement through jam_reply_to_message and
// jam_no_reply), and
// command and file-change approvals through the permission broker.
package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/provider/jsonrpc"
	"github.com/jam-dev/jam/internal/provider/settletools"
)

// Bounds of the adapter's own waits.
var (
	// PrepareTimeout bounds the handshake when the spec names no readiness bound.
	PrepareTimeout = 60 * time.Second
	// InterruptGrace is how long an interrupted turn may take to end before the app-server
	// is killed: it would otherwise keep working on an abandoned turn.
	InterruptGrace = 10 * time.Second
	// OverloadDelays are the waits before retrying a turn the model refused as overloaded
	// (Codex has already retried its stream by then) and a turn/start refused with -32001.
	OverloadDelays = []time.Duration{2 * time.Second, 8 * time.Second}
)

// ClientVersion is what Jam reports to the app-server.
const ClientVersion = "1"

// identity is the name Jam gives the provider in events.
const identity = "Codex"

// Runtime is one `codex app-server` child serving one runtime session.
type Runtime struct {
	*provider.Lifecycle

	// mu guards the fields below and is never held across a protocol call.
	proc    jsonrpc.Attached[*Runtime]
	mu      sync.Mutex
	thread  string
	version string
	turn    *turnState
}

var _ provider.Runtime = (*Runtime)(nil)

// New builds an unprepared Codex runtime. Jam's tools are offered as dynamic tools.
func New(spec provider.Spec) (provider.Runtime, error) {
	lc, err := provider.NewLifecycle(spec, provider.LifecycleConfig{Name: "codex", Who: "the app-server",
		ReadyFallback: PrepareTimeout, Capable: true, SettleTools: settletools.For})
	if err != nil {
		return nil, err
	}
	r := &Runtime{Lifecycle: lc}
	lc.Bind(provider.Adapter{Start: r.attach, Handshake: r.handshake, Release: func(context.Context) { r.proc.Leave(r) },
		Prepared: r.prepared, Liveness: r.proc.Liveness})
	return r, nil
}

// prepared is the bound thread: thread/resume of the bound thread, else thread/start.
func (r *Runtime) prepared() provider.Prepared {
	pid := r.proc.Liveness().PID
	r.mu.Lock()
	defer r.mu.Unlock()
	return provider.Prepared{ProviderSessionID: r.thread, Resumed: r.Spec.ProviderSessionID != "",
		Identity: identity, Version: r.version, PID: pid}
}

// threadResult is the part of a thread/start or thread/resume result Jam reads.
type threadResult struct {
	Thread struct {
		ID         string `json:"id"`
		Path       string `json:"path"`
		CLIVersion string `json:"cliVersion"`
	} `json:"thread"`
	Model string `json:"model"`
}

// handshake binds the session's thread on the initialized process: thread/resume of the
// bound thread (exactly that one, or ErrExactResumeUnavailable), else thread/start.
func (r *Runtime) handshake(ctx context.Context) error {
	p := r.proc.Get()
	c := p.Conn
	r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentRuntimeIdentity, Text: identity})
	params := r.threadParams()
	var res threadResult
	if want := r.Spec.ProviderSessionID; want != "" {
		params["threadId"] = want
		if err := c.Call(ctx, "thread/resume", params, &res); err != nil {
			return provider.ResumeFailed(ctx, "thread/resume "+want, err)
		}
		if res.Thread.ID != want {
			return fmt.Errorf("%w: thread/resume %s answered with thread %q", provider.ErrExactResumeUnavailable, want, res.Thread.ID)
		}
	} else {
		if err := c.Call(ctx, "thread/start", params, &res); err != nil {
			return err
		}
		if res.Thread.ID == "" {
			return errors.New("thread/start: the app-server returned no thread id")
		}
	}
	r.mu.Lock()
	r.thread, r.version = res.Thread.ID, domain.Truncate(res.Thread.CLIVersion, 100)
	r.mu.Unlock()
	p.Register(res.Thread.ID, r)
	if r.Spec.ProviderSessionID == "" {
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentProviderSessionBound, ProviderSessionID: res.Thread.ID})
	}
	return nil
}

// threadID is the bound thread.
func (r *Runtime) threadID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.thread
}

// paramsOf decodes a notification's or request's params; a malformed one is logged.
func paramsOf[T any](r *Runtime, method string, raw json.RawMessage) (T, bool) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		r.Log.Warn("codex sent params Jam cannot read", "method", method, "error", err)
		return v, false
	}
	return v, true
}
