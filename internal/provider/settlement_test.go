package provider

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jam-dev/jam/internal/domain"
)

func human(text string) Message {
	return Message{ID: uuid.New(), AuthorKind: domain.ParticipantHuman, AuthorName: "alice", Text: text}
}

func agentMsg(text string) Message {
	a := uuid.New()
	return Message{ID: uuid.New(), AuthorKind: domain.ParticipantAgent, AuthorAgentID: &a, AuthorName: "bot", Text: text}
}

func capable() SettlementOptions {
	return SettlementOptions{DispositionCapable: true, ExplicitDisposition: true}
}

func TestStagingRefusesUnknownConflictingAndLateDispositions(t *testing.T) {
	t.Parallel()
	m := human("hi")
	s := NewSettlement([]Message{m}, capable())
	emitted := 0
	emit := func(Disposition) { emitted++ }

	_, err := s.Stage(Disposition{MessageID: uuid.New(), Kind: domain.DispositionNoReply}, emit)
	require.ErrorIs(t, err, ErrUnknownMessage, "an id outside the active set is refused, never guessed")

	reply := Disposition{MessageID: m.ID, Kind: domain.DispositionReply, Text: "hello"}
	fresh, err := s.Stage(reply, emit)
	require.NoError(t, err)
	assert.True(t, fresh)

	fresh, err = s.Stage(reply, emit)
	require.NoError(t, err, "an identical retry is idempotent")
	assert.False(t, fresh)

	_, err = s.Stage(Disposition{MessageID: m.ID, Kind: domain.DispositionReply, Text: "other"}, emit)
	require.ErrorIs(t, err, ErrConflictingDisposition)
	_, err = s.Stage(Disposition{MessageID: m.ID, Kind: domain.DispositionNoReply}, emit)
	require.ErrorIs(t, err, ErrConflictingDisposition)

	s.Close()
	_, err = s.Stage(Disposition{MessageID: m.ID, Kind: domain.DispositionReply, Text: "hello"}, emit)
	require.ErrorIs(t, err, ErrStageClosed, "nothing is staged after the stage closed")
	assert.Equal(t, 1, emitted, "only the fresh disposition is emitted")
}

func TestStagingIsBoundedPerTurn(t *testing.T) {
	t.Parallel()
	msgs := []Message{human("a"), human("b"), human("c")}
	s := NewSettlement(msgs, SettlementOptions{DispositionCapable: true, ExplicitDisposition: true, Max: 2})
	for _, m := range msgs[:2] {
		_, err := s.Stage(Disposition{MessageID: m.ID, Kind: domain.DispositionNoReply}, nil)
		require.NoError(t, err)
	}
	_, err := s.Stage(Disposition{MessageID: msgs[2].ID, Kind: domain.DispositionNoReply}, nil)
	require.ErrorIs(t, err, ErrTooManyDispositions)
}

func TestStagingRejectsEmptyReplyAndUnknownKind(t *testing.T) {
	t.Parallel()
	m := human("a")
	s := NewSettlement([]Message{m}, capable())
	_, err := s.Stage(Disposition{MessageID: m.ID, Kind: domain.DispositionReply, Text: "  "}, nil)
	require.ErrorIs(t, err, ErrInvalidDisposition)
	_, err = s.Stage(Disposition{MessageID: m.ID, Kind: "shout"}, nil)
	require.ErrorIs(t, err, ErrInvalidDisposition)
}

func TestFailedOrCancelledTurnSettlesNothing(t *testing.T) {
	t.Parallel()
	for _, outcome := range []domain.TurnOutcome{domain.TurnFailed, domain.TurnCancelled} {
		t.Run(string(outcome), func(t *testing.T) {
			m := human("hi")
			s := NewSettlement([]Message{m}, capable())
			_, err := s.Stage(Disposition{MessageID: m.ID, Kind: domain.DispositionReply, Text: "hello"}, nil)
			require.NoError(t, err)
			s.AddText("partial answer")
			p := s.Plan(outcome)
			assert.Empty(t, p.Settles, "staged dispositions and text are discarded")
			assert.Equal(t, []uuid.UUID{m.ID}, p.Unsettled, "the message stays queued")
		})
	}
}

func TestCompleteTurnCommitsDispositionsInOrder(t *testing.T) {
	t.Parallel()
	a, b := human("a"), agentMsg("b")
	s := NewSettlement([]Message{a, b}, capable())
	_, err := s.Stage(Disposition{MessageID: b.ID, Kind: domain.DispositionNoReply, Reason: "fyi"}, nil)
	require.NoError(t, err)
	_, err = s.Stage(Disposition{MessageID: a.ID, Kind: domain.DispositionReply, Text: "answer"}, nil)
	require.NoError(t, err)
	s.AddText("final words")
	p := s.Plan(domain.TurnComplete)
	assert.Equal(t, []Settle{
		{MessageID: b.ID, How: domain.SettledAck},
		{MessageID: a.ID, How: domain.SettledReply, Text: "answer"},
	}, p.Settles)
	assert.Empty(t, p.Unsettled)
}

func TestFallbackRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		msg       func() Message
		opts      SettlementOptions
		text      string
		wantReply bool
		thought   bool
	}{
		{"human source posts the final text", func() Message { return human("q") }, capable(), "answer", true, false},
		{"not disposition-capable posts the final text", func() Message { return agentMsg("q") }, SettlementOptions{ExplicitDisposition: true}, "answer", true, false},
		{"explicit disposition switched off posts the final text", func() Message { return agentMsg("q") }, SettlementOptions{DispositionCapable: true}, "answer", true, false},
		{"agent source from a capable runtime becomes a thought", func() Message { return agentMsg("q") }, capable(), "answer", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.msg()
			s := NewSettlement([]Message{m}, tc.opts)
			s.AddText(tc.text)
			p := s.Plan(domain.TurnComplete)
			if tc.wantReply {
				require.Len(t, p.Settles, 1)
				assert.Equal(t, Settle{MessageID: m.ID, How: domain.SettledReply, Text: tc.text, Fallback: true}, p.Settles[0])
			} else {
				assert.Equal(t, []Settle{{MessageID: m.ID, How: domain.SettledAck}}, p.Settles, "never posted, acknowledged")
				assert.Empty(t, p.Unsettled)
			}
			assert.Equal(t, tc.thought, p.Thought == tc.text)
		})
	}
}

func TestFallbackRepliesToTheNewestAndAcksTheRest(t *testing.T) {
	t.Parallel()
	a, b := human("first"), human("second")
	notice := Message{ID: uuid.New(), Notice: true, Text: "runtime restarted"}
	s := NewSettlement([]Message{a, notice, b}, SettlementOptions{})
	s.AddText("one ")
	s.AddText("answer")
	p := s.Plan(domain.TurnComplete)
	assert.Equal(t, []Settle{
		{MessageID: notice.ID, How: domain.SettledAck},
		{MessageID: a.ID, How: domain.SettledAck, Fallback: true},
		{MessageID: b.ID, How: domain.SettledReply, Text: "one answer", Fallback: true},
	}, p.Settles)
}

func TestFinalTextReplacesStreamedDeltas(t *testing.T) {
	t.Parallel()
	m := human("q")
	s := NewSettlement([]Message{m}, SettlementOptions{})
	s.AddText("draft")
	s.SetFinal("final")
	assert.Equal(t, "final", s.Text())
}

func TestSilentSuccessfulTurnStagesSyntheticNoReply(t *testing.T) {
	t.Parallel()
	a, b := human("a"), human("b")
	s := NewSettlement([]Message{a, b}, SettlementOptions{})
	var emitted []Disposition
	staged := s.StageSilentNoReply(func(d Disposition) { emitted = append(emitted, d) })
	require.Len(t, staged, 2)
	assert.Equal(t, staged, emitted)
	assert.True(t, staged[0].Synthetic)
	p := s.Plan(domain.TurnComplete)
	assert.Equal(t, []Settle{{MessageID: a.ID, How: domain.SettledAck}, {MessageID: b.ID, How: domain.SettledAck}}, p.Settles)
}

func TestSilentNoReplyIsNotStagedWhenTheTurnSaidSomething(t *testing.T) {
	t.Parallel()
	s := NewSettlement([]Message{human("a")}, SettlementOptions{})
	s.AddText("hello")
	assert.Empty(t, s.StageSilentNoReply(nil))
}

func TestSteeredMessagesJoinTheActiveSet(t *testing.T) {
	t.Parallel()
	a, b := human("a"), human("b")
	s := NewSettlement([]Message{a}, capable())
	_, err := s.Stage(Disposition{MessageID: b.ID, Kind: domain.DispositionNoReply}, nil)
	require.True(t, errors.Is(err, ErrUnknownMessage))
	s.Activate(b, a)
	assert.Len(t, s.Active(), 2, "activating twice does not duplicate")
	_, err = s.Stage(Disposition{MessageID: b.ID, Kind: domain.DispositionNoReply}, nil)
	require.NoError(t, err)
}

// A reply longer than a message is kept whole (the store posts it in parts), up to the
// reply bound; a trailing memory citation is not part of it.
func TestReplyTextIsKeptWholeUpToTheReplyBound(t *testing.T) {
	t.Parallel()
	m := human("q")
	s := NewSettlement([]Message{m}, SettlementOptions{})
	big := strings.Repeat("x", domain.MaxMessageBytes+100)
	s.AddText(big + "\n<oai-mem-citation><citation_entries>a</citation_entries></oai-mem-citation>")
	p := s.Plan(domain.TurnComplete)
	require.Len(t, p.Settles, 1)
	assert.Equal(t, big, p.Settles[0].Text)
}

// The fallback is for a turn that disposed of nothing: an agent that answered one message
// with a tool did not mean its closing text as a reply to the other.
func TestNoFallbackOnceTheTurnDisposedOfAMessage(t *testing.T) {
	t.Parallel()
	a, b := human("first"), human("second")
	s := NewSettlement([]Message{a, b}, capable())
	_, err := s.Stage(Disposition{MessageID: a.ID, Kind: domain.DispositionReply, Text: "answer to a"}, nil)
	require.NoError(t, err)
	s.AddText("done, replied above")
	p := s.Plan(domain.TurnComplete)
	assert.Equal(t, []Settle{{MessageID: a.ID, How: domain.SettledReply, Text: "answer to a"}}, p.Settles)
	assert.Equal(t, []uuid.UUID{b.ID}, p.Unsettled, "the other message stays queued")
}

// A context message (past the room's hop limit) is acknowledged unless the agent disposed
// of it; the final text never answers it, and goes to the newest message that wants one.
func TestContextMessagesAreAcknowledgedAndNeverGetTheFallbackReply(t *testing.T) {
	t.Parallel()
	q, c1, c2 := human("question"), contextMsg("context one"), contextMsg("context two")
	tests := []struct {
		name   string
		msgs   []Message
		opts   SettlementOptions
		stage  []Disposition
		text   string
		want   []Settle
		queued []uuid.UUID
	}{
		{
			name: "the fallback replies to the newest message that is not context",
			msgs: []Message{c1, q, c2}, text: "answer",
			want: []Settle{
				{MessageID: c1.ID, How: domain.SettledAck},
				{MessageID: c2.ID, How: domain.SettledAck},
				{MessageID: q.ID, How: domain.SettledReply, Text: "answer", Fallback: true},
			},
		},
		{
			name: "a turn of only context posts nothing",
			msgs: []Message{c1, c2}, text: "echo",
			want: []Settle{{MessageID: c1.ID, How: domain.SettledAck}, {MessageID: c2.ID, How: domain.SettledAck}},
		},
		{
			name: "context is acknowledged even when the turn disposed of other messages",
			msgs: []Message{q, c1}, opts: capable(), text: "done",
			stage: []Disposition{{MessageID: q.ID, Kind: domain.DispositionReply, Text: "answer"}},
			want:  []Settle{{MessageID: q.ID, How: domain.SettledReply, Text: "answer"}, {MessageID: c1.ID, How: domain.SettledAck}},
		},
		{
			name: "an agent may still answer context on purpose",
			msgs: []Message{c1}, opts: capable(),
			stage: []Disposition{{MessageID: c1.ID, Kind: domain.DispositionReply, Text: "noted"}},
			want:  []Settle{{MessageID: c1.ID, How: domain.SettledReply, Text: "noted"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSettlement(tc.msgs, tc.opts)
			for _, d := range tc.stage {
				_, err := s.Stage(d, nil)
				require.NoError(t, err)
			}
			s.AddText(tc.text)
			p := s.Plan(domain.TurnComplete)
			assert.Equal(t, tc.want, p.Settles)
			assert.Equal(t, tc.queued, p.Unsettled)
			assert.Empty(t, p.Thought)
		})
	}
}

func TestATurnsSourceIsItsNewestMessageThatIsNotContext(t *testing.T) {
	t.Parallel()
	q, c := human("q"), contextMsg("c")
	assert.Equal(t, q.ID, *Turn{Messages: []Message{q, c}}.Source())
	assert.Equal(t, c.ID, *Turn{Messages: []Message{c}}.Source(), "all context: the newest")
	assert.Nil(t, Turn{}.Source())
}
