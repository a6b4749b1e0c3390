// Package questions is Jam's broker for a runtime's question to a human of its room
// (jam_ask_question): the question is posted as the agent's room message with a short
// answer code and recorded pending; the human's first correlated reply (a reply to the
// question, or "CODE answer") or an operator (POST /v1/questions/{id}/answer) answers it,
// and the asking runtime gets the answer, or proceeds without one once the deadline passes.
package questions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// EnvTimeout overrides the runtime.question.timeout_secs setting: seconds a question waits
// for an answer when neither the question nor its agent sets one, 0 for indefinitely.
const EnvTimeout = "JAM_QUESTION_TIMEOUT_SECS"

// TimeoutOverride is the operator's JAM_QUESTION_TIMEOUT_SECS, parsed once when the worker
// starts (TimeoutOverrideFromEnv) and injected. The zero value is unset: the setting
// applies.
type TimeoutOverride struct {
	Set bool
	// Timeout is how long a question waits; 0 is indefinitely.
	Timeout time.Duration
}

// TimeoutOverrideFromEnv parses JAM_QUESTION_TIMEOUT_SECS: unset or blank is no override;
// anything but an integer from 0 to domain.MaxQuestionTimeoutSecs is an error.
func TimeoutOverrideFromEnv(getenv func(string) string) (TimeoutOverride, error) {
	d, set, err := envSeconds(getenv, EnvTimeout, "wait indefinitely")
	return TimeoutOverride{Set: set, Timeout: d}, err
}

// envSeconds parses the knob name: whole seconds from 0 (zero says what 0 means) to
// domain.MaxQuestionTimeoutSecs; set is false when it is unset or blank.
func envSeconds(getenv func(string) string, name, zero string) (d time.Duration, set bool, err error) {
	raw := strings.TrimSpace(getenv(name))
	if raw == "" {
		return 0, false, nil
	}
	secs, err := strconv.Atoi(raw)
	if err != nil || secs < 0 || secs > domain.MaxQuestionTimeoutSecs {
		return 0, false, fmt.Errorf("%s=%q: want whole seconds from 0 (%s) to %d", name, raw, zero, domain.MaxQuestionTimeoutSecs)
	}
	return time.Duration(secs) * time.Second, true, nil
}

// EnvInline is how many seconds a question asked through a tool call waits for its answer
// before the call returns deferred (0: until the question's deadline, for clients that
// wait that long). Unset: DefaultInline.
const EnvInline = "JAM_QUESTION_INLINE_SECS"

// InlineFromEnv parses JAM_QUESTION_INLINE_SECS into Broker.Inline: unset or blank is
// DefaultInline; anything but whole seconds from 0 to domain.MaxQuestionTimeoutSecs is an
// error. 0 disables deferral (Broker.Inline 0).
func InlineFromEnv(getenv func(string) string) (time.Duration, error) {
	d, set, err := envSeconds(getenv, EnvInline, "wait until the deadline")
	if !set && err == nil {
		return DefaultInline, nil
	}
	return d, err
}

// DefaultPoll is how often a waiting Ask re-reads its question when Broker.Poll is 0: the
// answer may be committed by another process (the API server), whose commits do not wake
// this one.
const DefaultPoll = 250 * time.Millisecond

// Broker asks questions and waits for their answers. Ask blocks in the caller's goroutine
// and starts none of its own.
type Broker struct {
	Store *store.Store
	// Timeout is the parsed JAM_QUESTION_TIMEOUT_SECS (zero value: unset).
	Timeout TimeoutOverride
	// Poll is how often a waiting Ask re-reads its question (0: DefaultPoll).
	Poll time.Duration
	// Inline is the longest an Ask waits for the answer before it returns deferred (0: until
	// the question's deadline): the tool call it answers belongs to a client that gives up
	// on a call after about a minute (MCP clients), so the answer then reaches the agent as
	// the room message that gives it, in a turn of its own.
	Inline time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Log reports store trouble while waiting (nil: discarded).
	Log *slog.Logger
}

// Ask is a runtime's question.
type Ask struct {
	AgentID        uuid.UUID
	RoomID         uuid.UUID
	RuntimeSession uuid.UUID
	Text           string
	// RecipientID is the room participant (a human) to ask; nil asks the room's only human.
	RecipientID *uuid.UUID
	// TimeoutSecs is the question's own deadline in seconds (0: indefinitely); nil leaves it
	// to the agent, JAM_QUESTION_TIMEOUT_SECS and the setting.
	TimeoutSecs *int
}

// Answer is how a question ended: State answered carries the answer's Text and who gave
// it (By: human:<name> or operator); expired or cancelled means the runtime proceeds
// without an answer.
type Answer struct {
	QuestionID uuid.UUID
	State      domain.QuestionState
	Text       string
	By         string
	// Deferred: no answer within Broker.Inline; the question stays pending and its answer
	// comes to the agent as the room message that gives it (State pending). Code, Recipient
	// and Deadline say what the agent should expect.
	Deferred  bool
	Code      string
	Recipient string
	Deadline  *time.Time
}

// DefaultInline is the inline wait of a question asked through a tool call: under the one
// minute MCP clients (the TypeScript SDK, OpenCode) wait for a call.
const DefaultInline = 45 * time.Second

// The recipient refusals a RefusedError matches.
var (
	ErrNoHuman       = errors.New("no human in the room")
	ErrSeveralHumans = errors.New("several humans in the room and no recipient named")
	ErrNotAHuman     = errors.New("the recipient is not a human in the room")
)

// RefusedError is a question Jam will not ask; Reason is for the asking agent. It matches
// its Cause (ErrNoHuman, ErrSeveralHumans, ErrNotAHuman) and domain.ErrPrecondition.
type RefusedError struct {
	Cause  error
	Reason string
}

func (e *RefusedError) Error() string { return "question not asked: " + e.Reason }

func (e *RefusedError) Unwrap() []error {
	return []error{e.Cause, &domain.PreconditionError{Reason: e.Reason}}
}

// Ask asks a.Text of one human of the room and blocks until the question is answered, its
// deadline passes (State expired: the question is closed) or ctx ends. An ended ctx (the
// turn interrupted, the worker stopping) returns ctx.Err() and leaves the question pending
// and answerable: the same runtime session asking the same text again picks it up, or the
// answer that came meanwhile, once.
func (b *Broker) Ask(ctx context.Context, a Ask) (Answer, error) {
	if a.AgentID == uuid.Nil || a.RoomID == uuid.Nil || a.RuntimeSession == uuid.Nil {
		return Answer{}, errors.New("ask a question: agent, room and runtime session are required")
	}
	text, err := questionText(a.Text)
	if err != nil {
		return Answer{}, err
	}
	if a.TimeoutSecs != nil && *a.TimeoutSecs < 0 {
		return Answer{}, &domain.ValidationError{Field: "timeout_secs", Detail: "must not be negative"}
	}
	now := b.now()
	// A question left pending while nobody waited may be overdue by now.
	if _, err := b.Store.ExpireOverdue(ctx, now); err != nil {
		return Answer{}, err
	}
	prev, err := b.Store.ReusableQuestion(ctx, a.RuntimeSession, text)
	switch {
	case err == nil && prev.RoomID == a.RoomID && prev.AgentID == a.AgentID:
		if prev.State != domain.QuestionPending {
			return b.deliver(prev), nil
		}
		return b.wait(ctx, prev)
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return Answer{}, err
	}
	recipient, err := b.recipient(ctx, a)
	if err != nil {
		return Answer{}, err
	}
	timeout, err := b.timeout(ctx, a)
	if err != nil {
		return Answer{}, err
	}
	q := domain.Question{ID: uuid.New(), RoomID: a.RoomID, AgentID: a.AgentID, RuntimeSession: a.RuntimeSession,
		Recipient: recipient, Text: text, CreatedAt: now}
	if timeout > 0 {
		deadline := now.Add(timeout)
		q.Deadline = &deadline
	}
	if q, err = b.Store.CreateQuestion(ctx, q); err != nil {
		return Answer{}, err
	}
	return b.wait(ctx, q)
}

// questionText makes an agent's question storable (valid UTF-8 without control characters
// other than tab and newlines) and refuses an empty or oversized one.
func questionText(s string) (string, error) {
	s = strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return "", &domain.ValidationError{Field: "text", Detail: "must not be empty"}
	case len(s) > domain.MaxQuestionText:
		return "", &domain.ValidationError{Field: "text", Detail: "at most " + strconv.Itoa(domain.MaxQuestionText) + " bytes"}
	}
	return s, nil
}

// recipient is the one human asked: the named participant, or the room's only human.
func (b *Broker) recipient(ctx context.Context, a Ask) (string, error) {
	ps, err := b.Store.ListParticipants(ctx, a.RoomID)
	if err != nil {
		return "", err
	}
	var humans []string
	for _, p := range ps {
		if p.Kind != domain.ParticipantHuman {
			continue
		}
		if a.RecipientID != nil && p.ID == *a.RecipientID {
			return p.HumanName, nil
		}
		humans = append(humans, p.HumanName)
	}
	switch {
	case a.RecipientID != nil:
		return "", &RefusedError{Cause: ErrNotAHuman, Reason: "the recipient is not a human participant of this room"}
	case len(humans) == 0:
		return "", &RefusedError{Cause: ErrNoHuman, Reason: "there is no human in this room to ask; proceed with your best judgement"}
	case len(humans) > 1:
		return "", &RefusedError{Cause: ErrSeveralHumans, Reason: fmt.Sprintf(
			"this room has %d humans (%s); name the one to ask", len(humans), strings.Join(humans, ", "))}
	}
	return humans[0], nil
}

// timeout is how long the question waits (0: indefinitely): the request's, else the
// agent's, else JAM_QUESTION_TIMEOUT_SECS, else the stored setting, else the default;
// bounded by domain.MaxQuestionTimeoutSecs.
func (b *Broker) timeout(ctx context.Context, a Ask) (time.Duration, error) {
	d, err := b.unboundedTimeout(ctx, a)
	return min(d, domain.MaxQuestionTimeoutSecs*time.Second), err
}

func (b *Broker) unboundedTimeout(ctx context.Context, a Ask) (time.Duration, error) {
	if a.TimeoutSecs != nil {
		return time.Duration(*a.TimeoutSecs) * time.Second, nil
	}
	agent, err := b.Store.GetAgent(ctx, a.AgentID)
	if err != nil {
		return 0, err
	}
	if agent.QuestionTimeoutSecs != nil {
		return time.Duration(*agent.QuestionTimeoutSecs) * time.Second, nil
	}
	if b.Timeout.Set {
		return b.Timeout.Timeout, nil
	}
	stored, err := b.Store.GetSetting(ctx, domain.SettingQuestionTimeoutSecs)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return domain.DefaultQuestionTimeout, nil
	case err != nil:
		return 0, err
	}
	var secs int64
	if err := json.Unmarshal(stored.Value, &secs); err != nil || secs < 0 {
		return 0, fmt.Errorf("setting %s holds %s, not a number of seconds", domain.SettingQuestionTimeoutSecs, stored.Value)
	}
	return time.Duration(secs) * time.Second, nil
}

// wait polls the question until it leaves pending, its deadline passes or ctx ends.
func (b *Broker) wait(ctx context.Context, q domain.Question) (Answer, error) {
	var deadline <-chan time.Time
	if q.Deadline != nil {
		t := time.NewTimer(q.Deadline.Sub(b.now()))
		defer t.Stop()
		deadline = t.C
	}
	poll := b.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var inline <-chan time.Time
	if b.Inline > 0 && (q.Deadline == nil || q.Deadline.Sub(b.now()) > b.Inline) {
		t := time.NewTimer(b.Inline)
		defer t.Stop()
		inline = t.C
	}
	for {
		cur, err := b.Store.GetQuestion(ctx, q.ID)
		switch {
		case err == nil && cur.State != domain.QuestionPending:
			return b.deliver(cur), nil
		case errors.Is(err, store.ErrNotFound):
			// The agent or the room was deleted while it asked.
			return Answer{}, fmt.Errorf("question %s: %w", q.ID, err)
		case err != nil && ctx.Err() == nil:
			b.log().Warn("cannot read a pending question; retrying", "question", q.ID, "error", err)
		}
		select {
		case <-ctx.Done():
			// Not cancelled: the question stays answerable for the runtime's next ask.
			return Answer{QuestionID: q.ID, State: domain.QuestionPending}, ctx.Err()
		case <-deadline:
			return b.expire(ctx, q), nil
		case <-inline:
			return b.deferAnswer(ctx, q)
		case <-tick.C:
		}
	}
}

// deferAnswer returns a question still pending once the inline wait is over: recorded
// deferred, its answer reaches the agent as a room message. An answer that landed meanwhile
// is delivered at once instead.
func (b *Broker) deferAnswer(ctx context.Context, q domain.Question) (Answer, error) {
	cur, err := b.Store.DeferQuestion(ctx, q.ID, b.now())
	if err != nil {
		return Answer{}, err
	}
	if cur.State != domain.QuestionPending {
		return b.deliver(cur), nil
	}
	return Answer{QuestionID: cur.ID, State: cur.State, Deferred: true, Code: cur.Code, Recipient: cur.Recipient,
		Deadline: cur.Deadline}, nil
}

// expire closes a question whose deadline passed; an answer that landed first wins.
func (b *Broker) expire(ctx context.Context, q domain.Question) Answer {
	closed, err := b.Store.CloseQuestion(ctx, q.ID, domain.QuestionExpired, b.now())
	if err == nil || errors.Is(err, store.ErrQuestionSettled) {
		return b.deliver(closed)
	}
	b.log().Warn("cannot record an expired question; proceeding without an answer", "question", q.ID, "error", err)
	return Answer{QuestionID: q.ID, State: domain.QuestionExpired}
}

// deliver hands a settled question's outcome to the runtime and records that it did, so a
// later ask of the same text is a new question.
func (b *Broker) deliver(q domain.Question) Answer {
	// The caller's context may be ending; the record is small and must not be lost to it.
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	if _, err := b.Store.MarkQuestionDelivered(ctx, q.ID, b.now()); err != nil {
		b.log().Warn("cannot record a question's answer as delivered", "question", q.ID, "error", err)
	}
	return Answer{QuestionID: q.ID, State: q.State, Text: q.Answer, By: q.AnsweredBy}
}

// markTimeout bounds recording a delivery.
const markTimeout = 5 * time.Second

func (b *Broker) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

func (b *Broker) log() *slog.Logger {
	if b.Log != nil {
		return b.Log
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
