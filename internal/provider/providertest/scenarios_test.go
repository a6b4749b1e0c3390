package providertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// TestConformance runs the scenario matrix over every adapter. The scenarios of the
// "session" lane share one runtime, in order; every other lane has runtimes of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, a := range adapters {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			n := 5
			if a.maxLanes > 0 {
				n = a.maxLanes
			}
			slots := make(chan struct{}, n)
			lane := func(name string, fn func(*testing.T, adapter)) {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					slots <- struct{}{}
					defer func() { <-slots }()
					fn(t, a)
				})
			}
			lane("session", sessionLane)
			lane("resume of an unknown thread fails closed", unknownResume)
			lane("the child killed mid-turn", killedMidTurn)
			lane("the child exits during its handshake", handshakeExit)
			lane("garbage and oversized output", badOutput)
		})
	}
}

// sessionLane runs the scenarios that can share one runtime, then resumes its provider
// session in a new process.
func sessionLane(t *testing.T, a adapter) {
	l := newLane(t, a)
	in, p := l.start("", 1)
	thread := p.ProviderSessionID
	bind := func(res provider.TurnResult) {
		if thread == "" {
			thread = res.ProviderSessionID
		}
	}
	first := human("what is the plan? " + a.say("reply"))

	ok := t.Run("reply through Jam's tool", func(t *testing.T) {
		turn := turnOf(first)
		res := run(t, in.rt, turn)
		bind(res)
		require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
		s, ok := settleOf(res.Plan, first.ID)
		require.True(t, ok, "plan %+v", res.Plan)
		assert.Equal(t, domain.SettledReply, s.How)
		assert.Contains(t, s.Text, "what is the plan?")
		assert.False(t, s.Fallback, "settled by jam_reply_to_message, not the final text")
		assert.Len(t, res.Plan.Settles, 1, "the final text is not posted a second time")
		assert.Equal(t, 1, in.rec.count(turn.ID, domain.AgentDispositionStaged))
	})
	require.True(t, ok, "the session cannot go on without a first reply")

	t.Run("a tool call retried by id stages once", func(t *testing.T) {
		m := human("say it once " + a.say("retry"))
		turn := turnOf(m)
		before := len(l.model.Requests())
		res := run(t, in.rt, turn)
		bind(res)
		require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
		s, ok := settleOf(res.Plan, m.ID)
		require.True(t, ok, "plan %+v", res.Plan)
		assert.Equal(t, domain.SettledReply, s.How)
		assert.False(t, s.Fallback)
		assert.Len(t, res.Plan.Settles, 1)
		assert.Equal(t, 1, in.rec.count(turn.ID, domain.AgentDispositionStaged), "the retried call staged twice")
		if a.modelDriven {
			// The model's second call was delivered and answered: the CLI came back to the
			// model after each of the two calls.
			answered := 0
			var seen []string
			for _, r := range l.model.Requests()[before:] {
				if r.AfterToolResult {
					answered++
				}
				seen = append(seen, fmt.Sprintf("after=%v calls=%d results=%q", r.AfterToolResult, len(r.ToolCalls), r.ToolResults))
			}
			if a.caps.RetryDelivered {
				assert.GreaterOrEqual(t, answered, 2, "the model's retried call was never answered: %s", strings.Join(seen, "\n"))
			} else {
				assert.GreaterOrEqual(t, answered, 1, "the model's call was never answered: %s", strings.Join(seen, "\n"))
			}
		}
	})

	t.Run("steer mid-turn", func(t *testing.T) { steer(t, l, in, bind) })
	t.Run("interrupt", func(t *testing.T) { interrupt(t, l, in, bind) })
	t.Run("permission denied, the agent carries on", func(t *testing.T) { permissionDenied(t, l, in, bind) })

	t.Run("resume in a new process", func(t *testing.T) {
		require.NotEmpty(t, thread, "no provider session was bound")
		pid := in.rt.Liveness().PID
		require.NoError(t, in.rt.Teardown(context.Background(), domain.CheckpointBeforeStop))
		groupGone(t, pid)
		again, p2 := l.start(thread, 2)
		assert.True(t, p2.Resumed)
		assert.Equal(t, thread, p2.ProviderSessionID)
		before := len(l.model.Requests())
		m := human("do you remember? " + a.say("count"))
		res := run(t, again.rt, turnOf(m))
		require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
		s, ok := settleOf(res.Plan, m.ID)
		require.True(t, ok, "plan %+v", res.Plan)
		if !a.modelDriven {
			assert.Regexp(t, `^turns remembered: [1-9]`, s.Text, "the test agent forgot its earlier turns")
			return
		}
		remembered := false
		for _, r := range l.model.Requests()[before:] {
			remembered = remembered || strings.Contains(r.AllText(), "what is the plan?")
		}
		assert.True(t, remembered, "no request of the resumed process carried the first turn")
	})
}

// steer adds a message to a running turn: it joins the turn where the adapter can, else
// it is refused at once with ErrSteerUnsupported and runs as the next turn.
func steer(t *testing.T, l *lane, in *instance, bind func(provider.TurnResult)) {
	m1, m2 := human("first "+l.a.say("steer")), human("second, while you work "+l.a.say("reply"))
	turn := turnOf(m1)
	done := make(chan provider.TurnResult, 1)
	go func() { done <- run(t, in.rt, turn) }()
	wait.Eventually(t, turnBound, func() bool { return in.rec.count(turn.ID, domain.AgentTurnStarted) > 0 }, "the turn to start")
	if l.a.modelDriven {
		wait.Eventually(t, turnBound, func() bool { return in.rec.count(turn.ID, domain.AgentTextDelta) > 0 }, "the model to stream")
	}
	if !l.a.caps.Steer {
		start := time.Now()
		err := in.rt.Steer(context.Background(), []provider.Message{m2})
		require.ErrorIs(t, err, provider.ErrSteerUnsupported)
		assert.Less(t, time.Since(start), refusalBound)
		res := <-done
		bind(res)
		require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
		_, ok := settleOf(res.Plan, m1.ID)
		assert.True(t, ok, "the running turn was disturbed by the refused steer: %+v", res.Plan)
		// The carried-over message is the next turn.
		next := run(t, in.rt, turnOf(m2))
		s, ok := settleOf(next.Plan, m2.ID)
		assert.True(t, ok && s.How == domain.SettledReply, "the carried-over message: %+v", next.Plan)
		return
	}
	wait.Eventually(t, 10*time.Second, func() error {
		return in.rt.Steer(context.Background(), []provider.Message{m2})
	}, "the steer to be taken")
	res := <-done
	bind(res)
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	for _, m := range []provider.Message{m1, m2} {
		s, ok := settleOf(res.Plan, m.ID)
		assert.True(t, ok && s.How == domain.SettledReply && !s.Fallback, "message %q: %+v", m.Text, res.Plan)
	}
	assert.ErrorIs(t, in.rt.Steer(context.Background(), []provider.Message{human("late")}), provider.ErrNoTurn)
}

// interrupt ends a turn that would not end by itself as Cancelled, settling nothing; the
// runtime serves the next turn, and an interrupt between turns is a no-op.
func interrupt(t *testing.T, l *lane, in *instance, bind func(provider.TurnResult)) {
	turn := turnOf(human("take your time " + l.a.say("wedge")))
	type result struct {
		res provider.TurnResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), turnBound)
		defer cancel()
		res, err := in.rt.RunTurn(ctx, turn)
		done <- result{res, err}
	}()
	wait.Eventually(t, turnBound, func() bool { return in.rec.count(turn.ID, domain.AgentTurnStarted) > 0 }, "the turn to start")
	if l.a.modelDriven {
		wait.Eventually(t, turnBound, func() bool { return in.rec.count(turn.ID, domain.AgentTextDelta) > 0 }, "the model to stream")
	}
	start := time.Now()
	require.NoError(t, in.rt.Interrupt(context.Background()))
	var r result
	select {
	case r = <-done:
	case <-time.After(failBound):
		t.Fatalf("the interrupted turn did not end within %v", failBound)
	}
	require.NoError(t, r.err)
	assert.Equal(t, domain.TurnCancelled, r.res.Outcome)
	assert.Empty(t, r.res.Plan.Settles)
	t.Logf("interrupt took %v", time.Since(start))
	require.NoError(t, in.rt.Interrupt(context.Background()), "an interrupt between turns is a no-op")
	m := human("still there? " + l.a.say("reply"))
	res := run(t, in.rt, turnOf(m))
	bind(res)
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	_, ok := settleOf(res.Plan, m.ID)
	assert.True(t, ok, "the runtime after an interrupt: %+v", res.Plan)
}

// permissionDenied: the agent asks to run a command, the broker denies, the command does
// not run and the agent still answers.
func permissionDenied(t *testing.T, l *lane, in *instance, bind func(provider.TurnResult)) {
	before := len(l.broker.requests())
	m := human("make a file " + l.a.say("permission"))
	turn := turnOf(m)
	res := run(t, in.rt, turn)
	bind(res)
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	asked := l.broker.requests()[before:]
	require.Len(t, asked, 1, "the broker was asked %d times", len(asked))
	assert.Equal(t, "execute", asked[0].ToolKey)
	assert.Equal(t, in.spec.AgentID, asked[0].AgentID)
	assert.Equal(t, 1, in.rec.count(turn.ID, domain.AgentPermissionRequest))
	if l.a.modelDriven {
		assert.Contains(t, asked[0].Title, "denied-", "the request names the command")
		_, err := os.Stat(l.script.deniedFile(m.ID.String()))
		assert.True(t, errors.Is(err, os.ErrNotExist), "a denied command ran: %v", err)
	}
	s, ok := settleOf(res.Plan, m.ID)
	if !l.a.caps.CarriesOnAfterDenial {
		assert.True(t, ok && s.How == domain.SettledAck, "the turn that ended at the denial left its message: %+v", res.Plan)
		next := human("and now? " + l.a.say("reply"))
		res := run(t, in.rt, turnOf(next))
		bind(res)
		_, ok := settleOf(res.Plan, next.ID)
		assert.True(t, ok, "the runtime after the denial: %+v", res.Plan)
		return
	}
	assert.True(t, ok && s.How == domain.SettledReply, "the agent did not carry on after the denial: %+v", res.Plan)
}

// unknownResume: a provider session the provider does not have is never replaced by a
// fresh one; the failed prepare leaves no process.
func unknownResume(t *testing.T, a adapter) {
	l := newLane(t, a)
	in := l.build(a.unknownThread(), 1)
	_, err := in.prepare()
	require.ErrorIs(t, err, provider.ErrExactResumeUnavailable)
	assert.Zero(t, in.rec.count("", domain.AgentProviderSessionBound), "no silent fresh thread")
	assert.False(t, in.rt.Liveness().ProcessAlive, "the failed prepare left its child")
	select {
	case pid := <-l.spawned:
		groupGone(t, pid)
	default:
		// Some adapters refuse before they start anything (an id that cannot be theirs).
	}
}

// killedMidTurn: the provider dies while a turn runs: the turn fails as exited, Exited
// closes, and teardown leaves nothing.
func killedMidTurn(t *testing.T, a adapter) {
	l := newLane(t, a)
	in, p := l.start("", 1)
	turn := turnOf(human("a long job " + a.say("wedge")))
	type result struct {
		res provider.TurnResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), turnBound)
		defer cancel()
		res, err := in.rt.RunTurn(ctx, turn)
		done <- result{res, err}
	}()
	wait.Eventually(t, turnBound, func() bool { return in.rec.count(turn.ID, domain.AgentTurnStarted) > 0 }, "the turn to start")
	if a.modelDriven {
		wait.Eventually(t, turnBound, func() bool { return in.rec.count(turn.ID, domain.AgentTextDelta) > 0 }, "the model to stream")
	}
	// The whole group: an npm-installed CLI's launcher may run the agent as its child, and
	// killing the launcher alone leaves the agent answering on the same pipes.
	require.NoError(t, syscall.Kill(-p.PID, syscall.SIGKILL))
	var r result
	select {
	case r = <-done:
	case <-time.After(failBound):
		t.Fatalf("the turn of a killed child did not end within %v", failBound)
	}
	assert.True(t, exitedErr(r.res, r.err), "turn %+v, error %v", r.res, r.err)
	if r.err == nil {
		assert.Equal(t, []string{turn.Messages[0].ID.String()}, uuidStrings(r.res.Plan.Unsettled), "the message stays queued")
	}
	exited(t, in.rt)
	require.NoError(t, in.rt.Teardown(context.Background(), domain.CheckpointBeforeStop))
	groupGone(t, p.PID)
	_, err := in.rt.RunTurn(context.Background(), turnOf(human("after")))
	assert.Error(t, err, "a dead runtime took a turn")
}

func uuidStrings[T interface{ String() string }](ids []T) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, id.String())
	}
	return out
}
