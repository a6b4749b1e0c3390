package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/domain"
)

// joinOwned adds another owned agent (with a template) to the world's room.
func (w *world) joinOwned(t *testing.T, name string) (domain.Agent, uuid.UUID) {
	t.Helper()
	ctx, now := context.Background(), time.Now()
	a, err := w.st.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: name, Kind: domain.AgentOwned, CreatedAt: now}, "")
	require.NoError(t, err)
	cfg := domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP}.Normalized()
	_, err = w.st.CreateTemplate(ctx, domain.Template{ID: uuid.New(), AgentID: a.ID, Config: cfg, CreatedAt: now})
	require.NoError(t, err)
	m, err := w.st.AddAgentToRoom(ctx, w.room.ID, a.ID, now)
	require.NoError(t, err)
	return a, m.Session.RuntimeSessionID
}

func (w *world) maxHops(t *testing.T, n int) {
	t.Helper()
	raw, _ := json.Marshal(n)
	require.NoError(t, w.st.PutSetting(context.Background(), domain.SettingMaxAgentHops, raw, time.Now()))
}

// agentReply settles message `to` for agent with a reply, as the agent's own turn would.
func (w *world) agentReply(t *testing.T, agent domain.Agent, to domain.Message, text string) domain.Message {
	t.Helper()
	_, r, err := w.st.Settle(context.Background(), agent.ID, to.ID, domain.SettledReply, text, time.Now())
	require.NoError(t, err)
	return *r
}

// A queue holding only context (past the hop limit) runs no turn: the runtime is not even
// asked. The context reaches the agent with its next real turn, which acknowledges it.
func TestATurnOfOnlyContextRunsNothingAndTheNextTurnAcknowledgesIt(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	other, _ := w.joinOwned(t, "reviewer")
	w.maxHops(t, 1)
	question := w.post(t, "question")
	_, _, err := w.st.Settle(ctx, w.agent.ID, question.ID, domain.SettledAck, "", time.Now())
	require.NoError(t, err)
	first := w.agentReply(t, other, question, "one")
	_, _, err = w.st.Settle(ctx, w.agent.ID, first.ID, domain.SettledAck, "", time.Now())
	require.NoError(t, err)
	// The reviewer speaks up again: two hops past the human, past the limit of one.
	aside, err := w.st.PostMessage(ctx, domain.Message{ID: uuid.New(), RoomID: w.room.ID, AuthorKind: domain.ParticipantAgent,
		AuthorAgentID: &other.ID, Text: "an aside", CreatedAt: time.Now()})
	require.NoError(t, err)
	require.True(t, aside.Quiet)

	// No runtime is prepared: a turn that reached the runtime would fail as not live.
	res, err := w.turn(t, 1)
	require.NoError(t, err)
	assert.Equal(t, activities.RunTurnResult{Outcome: domain.TurnComplete}, res)
	in, err := w.st.GetInbound(ctx, w.agent.ID, aside.ID)
	require.NoError(t, err)
	assert.Equal(t, domain.InboundQueued, in.State, "the context waits for a real turn")

	p := w.prepare(t)
	w.post(t, "new topic")
	res, err = w.turn(t, p.Generation)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Messages, "the context rides along")
	assert.Equal(t, 2, res.Settled)
	assert.Equal(t, []string{"one", "an aside", "echo: new topic"}, w.replies(t), "the human gets the answer, the context none")
	in, err = w.st.GetInbound(ctx, w.agent.ID, aside.ID)
	require.NoError(t, err)
	assert.Equal(t, domain.SettledAck, in.Settlement)
}

// A committed reply that wakes pokes the other owned agents' room sessions at once (never
// the author's own); one past the hop limit pokes no one; a failed poke fails nothing.
func TestAWakingReplyPokesTheOtherOwnedAgentsAndAQuietOneNoOne(t *testing.T) {
	w := newWorld(t)
	other, otherSession := w.joinOwned(t, "reviewer")
	w.maxHops(t, 1)
	var (
		mu     sync.Mutex
		poked  []uuid.UUID
		broken = errors.New("temporal is unreachable")
	)
	w.acts.Poke = func(_ context.Context, b domain.Binding) error {
		mu.Lock()
		defer mu.Unlock()
		poked = append(poked, b.RuntimeSessionID)
		return broken
	}
	pokes := func() []uuid.UUID {
		mu.Lock()
		defer mu.Unlock()
		return append([]uuid.UUID(nil), poked...)
	}
	p := w.prepare(t)

	w.post(t, "hello")
	res, err := w.turn(t, p.Generation)
	require.NoError(t, err, "a lost poke does not fail the committed turn")
	assert.Equal(t, 1, res.Settled)
	assert.Equal(t, []uuid.UUID{otherSession}, pokes(), "the reply (one hop) wakes the reviewer")

	// The reviewer answers a human's message (one hop); the builder's answer to that is two
	// hops, past the limit: posted, but it wakes no one.
	again := w.post(t, "and now?")
	w.agentReply(t, other, again, "reviewer says")
	res, err = w.turn(t, p.Generation)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Settled)
	assert.Equal(t, "echo: reviewer says", w.replies(t)[len(w.replies(t))-1])
	assert.Len(t, pokes(), 1, "a reply past the hop limit poked")
}
