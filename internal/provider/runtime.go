// Package provider is the seam between Jam and the coding agents it runs: the runtime
// interface every owned adapter implements, the provider-neutral event stream, the one
// settlement implementation, prompt envelopes, executable resolution and child processes.
// Adapters live in subpackages (acp, ...); nothing here knows a provider's wire protocol.
package provider

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// Runtime is one live provider process serving one runtime session.
type Runtime interface {
	// Prepare starts the provider and binds its session: the exact provider session when
	// Spec.ProviderSessionID is set (or it fails with ErrExactResumeUnavailable), else a new
	// one. It is cancellation-safe: a cancelled Prepare reaps whatever it started.
	Prepare(ctx context.Context) (Prepared, error)
	// RunTurn delivers one turn and blocks until the provider ends it. Cancelling ctx
	// interrupts the turn. The result holds the settlement plan; nothing is settled here.
	RunTurn(ctx context.Context, turn Turn) (TurnResult, error)
	// Steer adds messages to the running turn, or returns ErrSteerUnsupported so the caller
	// carries them over to the next turn.
	Steer(ctx context.Context, msgs []Message) error
	// Interrupt ends the running turn as Cancelled; it is a no-op between turns.
	Interrupt(ctx context.Context) error
	// Teardown stops the provider and reaps its process group. It is idempotent.
	Teardown(ctx context.Context, reason domain.CheckpointReason) error
	// Liveness reports the child's pid and whether the process and its transport are alive.
	Liveness() Liveness
	// Exited is closed when the provider process has exited, for whatever reason.
	Exited() <-chan struct{}
	// IdlePolicy says whether the idle reaper may stop this runtime.
	IdlePolicy() domain.IdlePolicy
	// ReadinessWarning is a human-readable caveat about the runtime, or "".
	ReadinessWarning() string
}

// Prepared is what Prepare established.
type Prepared struct {
	// ProviderSessionID is the provider's own session/thread id, new or resumed.
	ProviderSessionID string
	// Resumed is true when an existing provider session was continued.
	Resumed bool
	// Identity is the name the agent reported for itself ("" when it did not).
	Identity string
	// Version is the version the provider reported for itself ("" when it did not).
	Version string
	PID     int
}

// Liveness is a runtime's process and transport state.
type Liveness struct {
	PID           int  `json:"pid"`
	ProcessAlive  bool `json:"process_alive"`
	TransportOpen bool `json:"transport_open"`
}

// Spec is everything an adapter needs to run one runtime session.
type Spec struct {
	RuntimeSession uuid.UUID
	// Generation is the runtime instance generation the store issued for this instance.
	Generation int64
	AgentID    uuid.UUID
	RoomID     uuid.UUID
	Transport  domain.Transport
	// Executable is the resolved absolute path; Args its arguments.
	Executable string
	Args       []string
	// Env is the child's complete environment.
	Env []string
	// GuestEnv, for a sandboxed runtime, is the environment its provider sees inside the
	// sandbox (Env is then the sandbox CLI's); nil host-native. An adapter that passes a
	// value of the provider's own environment over its protocol (Copilot's model-provider
	// key) reads it here.
	GuestEnv []string
	// Dir is the workspace the provider works in.
	Dir string
	// StateDir is the session's provider-state directory when the provider keeps its state
	// there (the same path on the host and inside a sandbox); "" otherwise.
	StateDir string
	// MayMove: the session's room may run on another node that shares this node's host
	// store (its workspace and provider state are all in its host root), so a node that
	// lost its store kills this runtime before the others may start it there.
	MayMove bool
	// SharedHost, when set, is the Shared runtime host whose one provider process the
	// session shares with the host's other members (for adapters that can, such as Codex).
	SharedHost uuid.UUID
	// ReadyTimeout bounds the start handshake (spawn to a bound session) whatever the
	// caller's deadline; 0 is the adapter's default.
	ReadyTimeout time.Duration
	// ProviderSessionID, when set, is the exact provider session to resume.
	ProviderSessionID string
	// IdlePolicy overrides the catalog's policy when set.
	IdlePolicy domain.IdlePolicy
	// Settings are the template's settings for the transport (validated at save).
	Settings map[string]string
	// Briefing and Roster are rendered into prompts (ACP has no instruction channel).
	Briefing string
	Roster   Roster
	// Permissions answers the provider's permission requests; nil denies once.
	Permissions PermissionBroker
	// Redactor cleans what the runtime's text tells people (permission summaries, tool
	// titles, status and error lines) of secrets: the values of the variables the template
	// names, and credential shapes. nil redacts by shape only.
	Redactor *Redactor
	// Tools are Jam's runtime tools bound to this instance (nil: none). Adapters with a
	// native tool mechanism (Codex dynamic tools) call them directly; MCP is the same
	// registry served over MCP for adapters that take MCP servers (ACP, Claude Code).
	Tools ToolCaller
	MCP   *MCPEndpoint
	// Events receives every stamped event.
	Events Sink
	// Spawner starts the child in its own process group; nil uses DefaultSpawner.
	Spawner Spawner
	Log     *slog.Logger
	// Stderr receives the child's stderr (bounded by the adapter); nil discards it.
	Stderr io.Writer
}

// Factory builds an unprepared runtime from its spec.
type Factory func(Spec) (Runtime, error)

// Errors adapters return; classify with errors.Is.
var (
	// ErrExactResumeUnavailable: a bound provider session could not be resumed exactly; the
	// runtime fails closed instead of silently starting a fresh thread.
	ErrExactResumeUnavailable = errors.New("exact resume unavailable")
	// ErrSteerUnsupported: the provider cannot add input to a running turn.
	ErrSteerUnsupported = errors.New("steering is not supported by this provider")
	// ErrNotPrepared: the runtime has not been prepared or was torn down.
	ErrNotPrepared = errors.New("runtime is not prepared")
	// ErrTurnInProgress: a second turn was delivered while one is running.
	ErrTurnInProgress = errors.New("a turn is already running")
	// ErrRuntimeExited: the provider process is gone.
	ErrRuntimeExited = errors.New("runtime process exited")
	// ErrRuntimeNotLive: the node has no live runtime of that session and generation (the
	// worker restarted, or the runtime was replaced); the workflow must prepare again.
	ErrRuntimeNotLive = errors.New("runtime is not live on this node")
	// ErrNotReady: the provider did not finish its start handshake within its readiness
	// bound; what it started was torn down.
	ErrNotReady = errors.New("provider did not become ready")
	// ErrNoTurn: there is no running turn to steer into; the messages go to the next turn.
	ErrNoTurn = errors.New("no turn is running")
	// ErrNoAdapter: no adapter on this node runs the transport's provider.
	ErrNoAdapter = errors.New("no runtime adapter for this transport")
	// ErrSpawn: the provider's executable could not be started at all (missing, not
	// executable); retrying the same start cannot help.
	ErrSpawn = errors.New("the provider could not be started")
	// ErrIncompatible: the provider speaks a protocol (or protocol version) Jam does not.
	ErrIncompatible = errors.New("the provider speaks a protocol Jam does not")
	// ErrCredentialMissing: a credential the configuration names (the model provider's key
	// variable) is not in the provider's environment.
	ErrCredentialMissing = errors.New("a credential the configuration names is missing")
	// ErrInvalidSpec: the runtime was asked to start with an unusable specification.
	ErrInvalidSpec = errors.New("invalid runtime specification")
	// ErrShuttingDown: the node is stopping and starts no runtime; another attempt (on this
	// node once it is back, or elsewhere) may.
	ErrShuttingDown = errors.New("the node is shutting down")
)
