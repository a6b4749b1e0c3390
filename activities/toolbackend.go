package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/questions"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/tools"
)

// Asker is the question broker as the tools reach it.
type Asker interface {
	Ask(ctx context.Context, id tools.Identity, q tools.QuestionRequest) (tools.QuestionAnswer, error)
}

// ToolBackend is what Jam's runtime tools act through on a node: the store, fenced on the
// calling instance's generation, the question broker, and the pokes that wake the room's
// other owned agents when a tool posts.
type ToolBackend struct {
	Store     *store.Store
	Questions Asker
	// Poke wakes one room session (nil: Reconcile will).
	Poke func(ctx context.Context, b domain.Binding) error
	Log  *slog.Logger
	// Temporal starts the workspace operations of the repository tools (nil: refused).
	Temporal client.Client
}

var _ tools.Backend = (*ToolBackend)(nil)

// Current fails with tools.ErrRetired unless id is its session's live instance.
func (b *ToolBackend) Current(ctx context.Context, id tools.Identity) error {
	err := b.Store.CheckRuntimeInstance(ctx, id.RuntimeSession, id.Generation, id.AgentID)
	if errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %w", tools.ErrRetired, err)
	}
	return err
}

// SendMessage posts the agent's message to its room and wakes the other owned agents.
func (b *ToolBackend) SendMessage(ctx context.Context, id tools.Identity, text string) (domain.Message, error) {
	agent := id.AgentID
	m, err := b.Store.PostRuntimeMessage(ctx, id.RuntimeSession, id.Generation,
		domain.Message{ID: uuid.New(), RoomID: id.RoomID, AuthorAgentID: &agent, Text: text, CreatedAt: time.Now()})
	if errors.Is(err, store.ErrFenced) {
		return domain.Message{}, fmt.Errorf("%w: %w", tools.ErrRetired, err)
	}
	if err != nil {
		return domain.Message{}, err
	}
	PokeRoom(ctx, b.Store, b.Poke, b.Log, m)
	return m, nil
}

// RoomContext reads the agent's room.
func (b *ToolBackend) RoomContext(ctx context.Context, id tools.Identity, limit int) (tools.RoomContext, error) {
	room, err := b.Store.GetRoom(ctx, id.RoomID)
	if err != nil {
		return tools.RoomContext{}, err
	}
	ps, err := b.Store.ListParticipants(ctx, id.RoomID)
	if err != nil {
		return tools.RoomContext{}, err
	}
	names := map[uuid.UUID]string{}
	out := tools.RoomContext{Room: room.Name}
	for _, p := range ps {
		cp := tools.ContextParticipant{ID: p.ID, Kind: p.Kind, Name: p.HumanName}
		if p.AgentID != nil {
			a, err := b.Store.GetAgent(ctx, *p.AgentID)
			if err != nil {
				return tools.RoomContext{}, err
			}
			cp.Name, names[a.ID] = a.Name, a.Name
			if a.ID == id.AgentID {
				cp.You, out.You = true, a.Name
			}
		}
		out.Participants = append(out.Participants, cp)
	}
	msgs, err := b.Store.RecentMessages(ctx, id.RoomID, limit)
	if err != nil {
		return tools.RoomContext{}, err
	}
	for _, m := range msgs {
		author := m.AuthorHuman
		if m.AuthorAgentID != nil {
			author = names[*m.AuthorAgentID]
			if author == "" {
				author = "a former participant"
			}
		}
		out.Messages = append(out.Messages, tools.ContextMessage{ID: m.ID, Author: author, AuthorKind: m.AuthorKind,
			Text: m.Text, ReplyTo: m.ReplyTo, At: m.CreatedAt})
	}
	return out, nil
}

// Ask hands a question to the broker.
func (b *ToolBackend) Ask(ctx context.Context, id tools.Identity, q tools.QuestionRequest) (tools.QuestionAnswer, error) {
	if b.Questions == nil {
		return tools.QuestionAnswer{}, &tools.Refusal{Text: "Not asked: questions are not available on this node."}
	}
	return b.Questions.Ask(ctx, id, q)
}

// PokeRoom wakes the room sessions of the owned agents other than m's author, at once,
// unless m is past the room's hop limit (Quiet: it wakes no one). A lost poke strands
// nothing: the queue is durable and Reconcile pokes rooms with backlog.
func PokeRoom(ctx context.Context, st *store.Store, poke func(context.Context, domain.Binding) error, log *slog.Logger, m domain.Message) {
	if poke == nil || m.Quiet {
		return
	}
	bindings, err := st.OwnedBindingsInRoom(ctx, m.RoomID)
	if err != nil {
		logWarn(log, "cannot find the room sessions to wake; Reconcile will", "room", m.RoomID, "error", err)
		return
	}
	for _, b := range bindings {
		if m.AuthorAgentID != nil && *m.AuthorAgentID == b.AgentID {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, pokeTimeout)
		err := poke(pctx, b)
		cancel()
		if err != nil {
			logWarn(log, "room session poke failed; Reconcile will retry", "room", m.RoomID,
				"runtime_session", b.RuntimeSessionID, "error", err)
		}
	}
}

func logWarn(log *slog.Logger, msg string, args ...any) {
	if log != nil {
		log.Warn(msg, args...)
	}
}

// BrokerAsker is the question broker behind jam_ask_question and native asks.
type BrokerAsker struct{ Broker *questions.Broker }

var _ Asker = BrokerAsker{}

// Ask maps a tool's question onto the broker; a question Jam will not ask (no human, or
// several and none named) is a refusal the agent reads.
func (a BrokerAsker) Ask(ctx context.Context, id tools.Identity, q tools.QuestionRequest) (tools.QuestionAnswer, error) {
	ans, err := a.Broker.Ask(ctx, questions.Ask{AgentID: id.AgentID, RoomID: id.RoomID, RuntimeSession: id.RuntimeSession,
		Text: q.Text, RecipientID: q.RecipientID, TimeoutSecs: q.TimeoutSecs})
	var refused *questions.RefusedError
	var invalid *domain.ValidationError
	switch {
	case errors.As(err, &refused):
		return tools.QuestionAnswer{}, &tools.ErrNoRecipient{Reason: refused.Reason}
	case errors.As(err, &invalid):
		return tools.QuestionAnswer{}, &tools.Refusal{Text: "Not asked: " + invalid.Error() + "."}
	case err != nil:
		return tools.QuestionAnswer{}, err
	}
	by := ans.By
	if name, ok := strings.CutPrefix(by, "human:"); ok {
		by = name
	}
	return tools.QuestionAnswer{QuestionID: ans.QuestionID, State: ans.State, Text: ans.Text, By: by,
		Deferred: ans.Deferred, Code: ans.Code, Recipient: ans.Recipient, Deadline: ans.Deadline}, nil
}
