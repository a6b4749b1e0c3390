package provider

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// Message is one inbound room message a turn answers.
type Message struct {
	ID            uuid.UUID
	RoomID        uuid.UUID
	Seq           int64
	AuthorKind    domain.ParticipantKind
	AuthorAgentID *uuid.UUID
	// AuthorName is the human's name or the agent's name, for envelopes.
	AuthorName string
	Text       string
	// Notice marks a Jam-local notice: it is only ever acknowledged, never answered.
	Notice bool
	// Context marks a context-only inbound row (past the room's agent hop limit, or another
	// agent's question to a human):
	// the turn shows it but does not answer it; without a disposition it is acknowledged.
	Context bool
}

// FromHuman reports whether a human wrote the message.
func (m Message) FromHuman() bool { return m.AuthorKind == domain.ParticipantHuman }

// Turn is one provider turn: the messages it answers, oldest first.
type Turn struct {
	ID       string
	Messages []Message
	// Roster is who is in the room as the turn starts (nil: not known, nothing is said);
	// the runtime is told who joined or left since its last turn.
	Roster *Roster
}

// Source is the message the turn answers: its newest that is not context (its newest when
// all are).
func (t Turn) Source() *uuid.UUID {
	if len(t.Messages) == 0 {
		return nil
	}
	id := t.Messages[len(t.Messages)-1].ID
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if !t.Messages[i].Context {
			id = t.Messages[i].ID
			break
		}
	}
	return &id
}

// TurnResult is how a turn ended and what settling it would do.
type TurnResult struct {
	Outcome domain.TurnOutcome
	Plan    Plan
	// Err describes a failed turn (nil otherwise).
	Err error
	// ProviderSessionID is a provider session this turn made resumable when Prepare could
	// not yet report it (Claude Code writes a pinned session's transcript with its first
	// turn); the caller binds it when the runtime session has none.
	ProviderSessionID string
}

// Disposition is one staged settlement decision of a turn.
type Disposition struct {
	MessageID uuid.UUID              `json:"message_id"`
	Kind      domain.DispositionKind `json:"kind"`
	Text      string                 `json:"text,omitempty"`
	Reason    string                 `json:"reason,omitempty"`
	// Synthetic marks the no-reply Jam stages for a successful silent turn.
	Synthetic bool `json:"synthetic,omitempty"`
}

func (d Disposition) same(o Disposition) bool {
	return d.MessageID == o.MessageID && d.Kind == o.Kind && d.Text == o.Text && d.Reason == o.Reason
}

// Staging refusals; classify with errors.Is.
var (
	ErrUnknownMessage         = errors.New("the message is not part of this turn")
	ErrConflictingDisposition = errors.New("the message already has a different disposition")
	ErrTooManyDispositions    = errors.New("too many dispositions in one turn")
	ErrStageClosed            = errors.New("the turn has ended; no more dispositions")
	ErrInvalidDisposition     = errors.New("invalid disposition")
)

// SettlementOptions are the runtime's settlement capabilities.
type SettlementOptions struct {
	// DispositionCapable: the runtime settles through jam_reply_to_message / jam_no_reply.
	DispositionCapable bool
	// ExplicitDisposition: the prompt asks for an explicit disposition (every adapter sets
	// it). Off restores the final-text fallback for every source.
	ExplicitDisposition bool
	// Max bounds dispositions per turn (domain.MaxDispositionsPerTurn when 0).
	Max int
}

// Settlement is the one implementation of a turn's settlement rules, shared by every adapter:
// the active message set, staging of dispositions, the buffered final text, and the plan of
// what to commit when the turn ends. Nothing is committed here; the caller commits Plan only
// for TurnComplete(Complete).
type Settlement struct {
	mu     sync.Mutex
	opts   SettlementOptions
	active []Message
	staged []Disposition
	open   bool
	deltas strings.Builder
	final  *string
}

// NewSettlement opens the settlement of a turn answering msgs.
func NewSettlement(msgs []Message, opts SettlementOptions) *Settlement {
	if opts.Max <= 0 {
		opts.Max = domain.MaxDispositionsPerTurn
	}
	s := &Settlement{opts: opts, open: true}
	s.Activate(msgs...)
	return s
}

// Activate adds messages to the active set (a message steered into the running turn).
func (s *Settlement) Activate(msgs ...Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		if s.indexOf(m.ID) < 0 {
			s.active = append(s.active, m)
		}
	}
}

// Deactivate takes messages out of the active set again (a steer that did not reach the
// provider); a message that already has a disposition stays.
func (s *Settlement) Deactivate(msgs ...Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		if i := s.indexOf(m.ID); i >= 0 && !s.hasDisposition(m.ID) {
			s.active = append(s.active[:i], s.active[i+1:]...)
		}
	}
}

// HasDispositions reports whether anything was staged.
func (s *Settlement) HasDispositions() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.staged) > 0
}

// Active returns the turn's active messages in order.
func (s *Settlement) Active() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.active...)
}

func (s *Settlement) indexOf(id uuid.UUID) int {
	for i, m := range s.active {
		if m.ID == id {
			return i
		}
	}
	return -1
}

// Stage records a disposition. An identical retry is accepted and reports fresh=false; an
// unknown message, a conflicting second disposition, one over the bound, or one after the
// stage closed is refused. emit runs under the staging lock when the disposition is fresh,
// so every accepted disposition is sequenced before the turn's terminal event.
func (s *Settlement) Stage(d Disposition, emit func(Disposition)) (fresh bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open {
		return false, ErrStageClosed
	}
	if !domain.DispositionKinds.Has(d.Kind) {
		return false, fmt.Errorf("%w: kind %q", ErrInvalidDisposition, d.Kind)
	}
	if d.Kind == domain.DispositionReply && strings.TrimSpace(d.Text) == "" {
		return false, fmt.Errorf("%w: a reply needs text", ErrInvalidDisposition)
	}
	if s.indexOf(d.MessageID) < 0 {
		return false, fmt.Errorf("%w: %s", ErrUnknownMessage, d.MessageID)
	}
	for _, prev := range s.staged {
		if prev.MessageID == d.MessageID {
			if prev.same(d) {
				return false, nil
			}
			return false, ErrConflictingDisposition
		}
	}
	if len(s.staged) >= s.opts.Max {
		return false, ErrTooManyDispositions
	}
	s.staged = append(s.staged, d)
	if emit != nil {
		emit(d)
	}
	return true, nil
}

// AddText buffers a streamed assistant text delta.
func (s *Settlement) AddText(delta string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deltas.WriteString(delta)
}

// SetFinal records the provider's final assistant text, replacing the streamed deltas.
func (s *Settlement) SetFinal(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.final = &text
}

// Text is the turn's buffered final assistant text.
func (s *Settlement) Text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.text()
}

func (s *Settlement) text() string {
	if s.final != nil {
		return strings.TrimSpace(*s.final)
	}
	return strings.TrimSpace(s.deltas.String())
}

// StageSilentNoReply is ACP's rule for a successful turn that said nothing: every active
// message without a disposition gets a synthetic no-reply, so a silent turn acknowledges its
// sources instead of leaving them queued. It returns what it staged.
func (s *Settlement) StageSilentNoReply(emit func(Disposition)) []Disposition {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open || s.text() != "" {
		return nil
	}
	var out []Disposition
	for _, m := range s.active {
		if s.hasDisposition(m.ID) || len(s.staged) >= s.opts.Max {
			continue
		}
		d := Disposition{MessageID: m.ID, Kind: domain.DispositionNoReply, Reason: "the turn ended without a response", Synthetic: true}
		s.staged = append(s.staged, d)
		out = append(out, d)
		if emit != nil {
			emit(d)
		}
	}
	return out
}

func (s *Settlement) hasDisposition(id uuid.UUID) bool {
	for _, d := range s.staged {
		if d.MessageID == id {
			return true
		}
	}
	return false
}

// Close ends staging; later dispositions are refused. Adapters close before they emit
// TurnComplete.
func (s *Settlement) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = false
}

// Settle is one settlement the caller commits: a reply posts Text to the room linked to the
// message; an ack settles without a room message.
type Settle struct {
	MessageID uuid.UUID         `json:"message_id"`
	How       domain.Settlement `json:"how"`
	Text      string            `json:"text,omitempty"`
	// Fallback marks a reply made from the buffered final text rather than a disposition.
	Fallback bool `json:"fallback,omitempty"`
}

// Plan is what committing a turn does.
type Plan struct {
	Settles []Settle `json:"settles"`
	// Thought is final text that is shown as a thought and never posted (an agent-sourced
	// message answered by a disposition-capable runtime without a disposition).
	Thought string `json:"thought,omitempty"`
	// Unsettled messages stay queued.
	Unsettled []uuid.UUID `json:"unsettled,omitempty"`
}

// Plan closes the stage and computes what committing the turn does. Only Complete settles:
// Failed and Cancelled discard staged dispositions and text, and every message stays queued.
func (s *Settlement) Plan(outcome domain.TurnOutcome) Plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = false
	var p Plan
	if outcome != domain.TurnComplete {
		for _, m := range s.active {
			p.Unsettled = append(p.Unsettled, m.ID)
		}
		return p
	}
	for _, d := range s.staged {
		st := Settle{MessageID: d.MessageID, How: domain.SettledAck}
		if d.Kind == domain.DispositionReply {
			st.How, st.Text = domain.SettledReply, domain.ReplyText(d.Text)
		}
		p.Settles = append(p.Settles, st)
	}
	text := s.text()
	// Messages the fallback may answer with the final text; the reply goes to the newest.
	// The fallback is for a turn that completed without any disposition: once the agent
	// disposed of some messages itself, its final text is not a reply to the rest, which
	// stay queued.
	var fallback []Message
	disposed := len(s.staged) > 0
	for _, m := range s.active {
		switch {
		case s.hasDisposition(m.ID):
		case m.Notice, m.Context:
			// Neither asks for an answer: the final text never replies to one.
			p.Settles = append(p.Settles, Settle{MessageID: m.ID, How: domain.SettledAck})
		case disposed:
			p.Unsettled = append(p.Unsettled, m.ID)
		case m.FromHuman() || !s.opts.DispositionCapable || !s.opts.ExplicitDisposition:
			fallback = append(fallback, m)
		default:
			// Two agents must not loop on each other's final text: nothing is posted, and
			// the message is acknowledged (left queued, every Reconcile would deliver it
			// again, a loop at Reconcile's pace).
			p.Settles = append(p.Settles, Settle{MessageID: m.ID, How: domain.SettledAck})
			if text != "" {
				p.Thought = text
			}
		}
	}
	if len(fallback) > 0 {
		if text == "" {
			for _, m := range fallback {
				p.Unsettled = append(p.Unsettled, m.ID)
			}
			return p
		}
		last := len(fallback) - 1
		for _, m := range fallback[:last] {
			p.Settles = append(p.Settles, Settle{MessageID: m.ID, How: domain.SettledAck, Fallback: true})
		}
		p.Settles = append(p.Settles, Settle{MessageID: fallback[last].ID, How: domain.SettledReply,
			Text: domain.ReplyText(text), Fallback: true})
	}
	return p
}

// CloseTurn ends a turn's events the same way for every adapter: the final text of a
// complete turn, the error of a failed one, the plan (closing the settlement), the thought
// an agent's message gets instead of a reply, then TurnComplete.
func CloseTurn(s *Stamper, settle *Settlement, outcome domain.TurnOutcome, turnErr error) TurnResult {
	if outcome == domain.TurnComplete {
		if text := settle.Text(); text != "" {
			s.Emit(AgentEvent{Kind: domain.AgentTextFinal, Text: text})
		}
	}
	if turnErr != nil {
		s.Emit(AgentEvent{Kind: domain.AgentError, Text: turnErr.Error()})
	}
	plan := settle.Plan(outcome)
	if plan.Thought != "" {
		s.Emit(AgentEvent{Kind: domain.AgentThought, Text: plan.Thought})
	}
	s.Emit(AgentEvent{Kind: domain.AgentTurnComplete, Outcome: outcome})
	return TurnResult{Outcome: outcome, Plan: plan, Err: turnErr}
}

// StageInTurn stages a settlement tool call's disposition in the running turn's settlement
// s (nil: no turn runs, ErrNoTurn), for an adapter's StageDisposition.
func StageInTurn(s *Settlement, d Disposition, emit func(Disposition)) error {
	if s == nil {
		return ErrNoTurn
	}
	_, err := s.Stage(d, emit)
	return err
}
