package provider

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// AgentEvent is one entry of the provider-neutral runtime event stream. Every event is
// stamped with the runtime session, the runtime instance generation that produced it, the
// turn it belongs to (empty outside a turn) and a per-turn sequence number.
type AgentEvent struct {
	RuntimeSession uuid.UUID             `json:"runtime_session"`
	Generation     int64                 `json:"generation"`
	TurnID         string                `json:"turn_id,omitempty"`
	Seq            int64                 `json:"seq"`
	Kind           domain.AgentEventKind `json:"kind"`
	At             time.Time             `json:"at"`
	// SourceMessageID is the message the turn answers (its last active message).
	SourceMessageID *uuid.UUID `json:"source_message_id,omitempty"`
	// DispositionCapable is true when the runtime settles through jam_reply_to_message /
	// jam_no_reply; ACP runtimes are not.
	DispositionCapable bool `json:"disposition_capable"`

	// Text carries assistant text, thoughts, status lines, identities and errors.
	Text              string                 `json:"text,omitempty"`
	Outcome           domain.TurnOutcome     `json:"outcome,omitempty"`
	Tool              *ToolCall              `json:"tool,omitempty"`
	Usage             *Usage                 `json:"usage,omitempty"`
	Disposition       *Disposition           `json:"disposition,omitempty"`
	Permission        *PermissionAsk         `json:"permission,omitempty"`
	ProviderSessionID string                 `json:"provider_session_id,omitempty"`
	Truncated         bool                   `json:"truncated,omitempty"`
	Extra             map[string]json.Number `json:"extra,omitempty"`
}

// ToolCall describes one provider tool call or its result.
type ToolCall struct {
	ID     string `json:"id"`
	Title  string `json:"title,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Status string `json:"status,omitempty"`
}

// Usage is one turn's token accounting. A nil field means the provider did not report that
// category; a zero is never fabricated.
type Usage struct {
	InputTokens       *int64 `json:"input_tokens"`
	CachedInputTokens *int64 `json:"cached_input_tokens"`
	OutputTokens      *int64 `json:"output_tokens"`
	ReasoningTokens   *int64 `json:"reasoning_tokens"`
	TotalTokens       *int64 `json:"total_tokens"`
}

// PermissionAsk is what a runtime asked permission for.
type PermissionAsk struct {
	ID      uuid.UUID `json:"id"`
	ToolKey string    `json:"tool_key"`
	Title   string    `json:"title"`
}

// MaxEventText bounds the text one event carries; longer text is cut and marked Truncated.
const MaxEventText = 64 << 10

// Sink receives a runtime's events. It must not block for long: adapters call it from their
// protocol readers.
type Sink func(AgentEvent)

// Stamper stamps and emits the events of one runtime instance. Events of a turn get
// increasing sequence numbers; once retired the stamper drops everything, so a runtime
// instance that was replaced can never emit into its successor's turn.
type Stamper struct {
	mu         sync.Mutex
	session    uuid.UUID
	generation int64
	sink       Sink
	turn       string
	source     *uuid.UUID
	capable    bool
	seq        int64
	// retired is atomic so Retire never waits behind a sink that is slow (a store write):
	// teardown must not stall on event delivery. An Emit already in the sink finishes; the
	// store's generation fence refuses anything it writes for a successor's turn.
	retired atomic.Bool
	now     func() time.Time
	// red cleans the text of events people read (set by Redact).
	red *Redactor
}

// NewStamper builds the stamper of one runtime instance.
func NewStamper(session uuid.UUID, generation int64, capable bool, sink Sink) *Stamper {
	if sink == nil {
		sink = func(AgentEvent) {}
	}
	return &Stamper{session: session, generation: generation, sink: sink, capable: capable, now: time.Now}
}

// Stamper is the stamper of the runtime instance s describes: its events go to s.Events,
// what they tell people redacted with s.Redactor. Every adapter builds its stamper here.
func (s Spec) Stamper(capable bool) *Stamper {
	return NewStamper(s.RuntimeSession, s.Generation, capable, s.Events).Redact(s.Redactor)
}

// BeginTurn starts numbering a new turn.
func (s *Stamper) BeginTurn(turn string, source *uuid.UUID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turn, s.source, s.seq = turn, source, 0
}

// EndTurn stops attributing events to the finished turn.
func (s *Stamper) EndTurn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turn, s.source = "", nil
}

// SetSink redirects the stream (a turn routes events to its own consumer).
func (s *Stamper) SetSink(sink Sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sink == nil {
		sink = func(AgentEvent) {}
	}
	s.sink = sink
}

// SetCapable records whether the runtime settles through Jam's disposition tools, when the
// adapter learns it only at start (whether its MCP client connected).
func (s *Stamper) SetCapable(capable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capable = capable
}

// Redact makes the stamper clean what its events tell people with red: tool and permission
// titles, and the text of every kind but the agent's own assistant text.
func (s *Stamper) Redact(red *Redactor) *Stamper {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.red = red
	return s
}

// redactsText: the kinds whose text may quote tool input or provider output (assistant text
// is what the agent chose to say, and its deltas cannot be redacted one by one).
func redactsText(k domain.AgentEventKind) bool {
	switch k {
	case domain.AgentTextDelta, domain.AgentTextFinal, domain.AgentDispositionStaged, domain.AgentRuntimeIdentity,
		domain.AgentProviderSessionBound:
		return false
	}
	return true
}

// Retire stops the stamper for good.
func (s *Stamper) Retire() { s.retired.Store(true) }

// Emit stamps e and hands it to the sink; it reports false when the instance is retired.
func (s *Stamper) Emit(e AgentEvent) bool {
	if s.retired.Load() {
		return false
	}
	s.mu.Lock()
	if s.retired.Load() {
		s.mu.Unlock()
		return false
	}
	s.seq++
	e.RuntimeSession, e.Generation, e.TurnID, e.Seq = s.session, s.generation, s.turn, s.seq
	e.SourceMessageID, e.DispositionCapable = s.source, s.capable
	if e.At.IsZero() {
		e.At = s.now().UTC()
	}
	if redactsText(e.Kind) {
		e.Text = s.red.Redact(e.Text)
	}
	if e.Tool != nil {
		tc := *e.Tool
		tc.Title = s.red.Redact(tc.Title)
		e.Tool = &tc
	}
	if e.Permission != nil {
		pa := *e.Permission
		pa.Title = s.red.Redact(pa.Title)
		e.Permission = &pa
	}
	if len(e.Text) > MaxEventText {
		e.Text, e.Truncated = domain.Truncate(e.Text, MaxEventText), true
	}
	sink := s.sink
	// The sink runs under the lock so events reach it in sequence order.
	sink(e)
	s.mu.Unlock()
	return true
}
