package acp_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/provider/acp"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testagent.Cleanup()
	os.Exit(code)
}

// recorder collects a runtime's events.
type recorder struct {
	mu     sync.Mutex
	events []provider.AgentEvent
}

func (r *recorder) sink(e provider.AgentEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) kinds(turn string) []domain.AgentEventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []domain.AgentEventKind
	for _, e := range r.events {
		if e.TurnID == turn {
			out = append(out, e.Kind)
		}
	}
	return out
}

func (r *recorder) find(turn string, kind domain.AgentEventKind) []provider.AgentEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []provider.AgentEvent
	for _, e := range r.events {
		if e.TurnID == turn && e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// fixture is one runtime of the real jam-testagent.
type fixture struct {
	spec  provider.Spec
	rec   *recorder
	state string
}

func newFixture(t testing.TB, args ...string) *fixture {
	t.Helper()
	state := t.TempDir()
	return newFixtureIn(t, state, args...)
}

func newFixtureIn(t testing.TB, state string, args ...string) *fixture {
	rec := &recorder{}
	return &fixture{rec: rec, state: state, spec: provider.Spec{
		RuntimeSession: uuid.New(), Generation: 1, AgentID: uuid.New(), RoomID: uuid.New(),
		Transport: domain.TransportACP, Executable: testagent.Binary(t),
		Args: append([]string{"--state-dir", state}, args...), Env: os.Environ(), Dir: t.TempDir(),
		Events: rec.sink,
	}}
}

func (f *fixture) start(t testing.TB) (provider.Runtime, provider.Prepared) {
	t.Helper()
	rt, err := acp.New(f.spec)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := rt.Prepare(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Teardown(context.Background(), domain.CheckpointBeforeStop) })
	return rt, p
}

func turnOf(texts ...string) provider.Turn {
	t := provider.Turn{ID: uuid.NewString()}
	for _, text := range texts {
		t.Messages = append(t.Messages, provider.Message{ID: uuid.New(), AuthorKind: domain.ParticipantHuman,
			AuthorName: "alice", Text: text})
	}
	return t
}

func run(t *testing.T, rt provider.Runtime, turn provider.Turn) provider.TurnResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := rt.RunTurn(ctx, turn)
	require.NoError(t, err)
	return res
}

func groupGone(t *testing.T, pgid int) {
	t.Helper()
	wait.Eventually(t, 10*time.Second, func() error {
		if n, err := provider.ProcessGroupMembers(pgid); err != nil || n != 0 {
			return fmt.Errorf("%d members (%v)", n, err)
		}
		return nil
	}, "process group %d to have no members", pgid)
}

func TestPrepareReportsIdentityAndBindsANewSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "--name", "Scripted Agent")
	rt, p := f.start(t)
	assert.True(t, strings.HasPrefix(p.ProviderSessionID, "tas_"))
	assert.False(t, p.Resumed)
	assert.Equal(t, "Scripted Agent", p.Identity)
	assert.NotZero(t, p.PID)
	live := rt.Liveness()
	assert.True(t, live.ProcessAlive)
	assert.True(t, live.TransportOpen)
	assert.Equal(t, domain.IdleAllow, rt.IdlePolicy())
	assert.Empty(t, rt.ReadinessWarning())
	ids := f.rec.find("", domain.AgentRuntimeIdentity)
	require.Len(t, ids, 1)
	assert.Equal(t, "Scripted Agent", ids[0].Text)
	bound := f.rec.find("", domain.AgentProviderSessionBound)
	require.Len(t, bound, 1)
	assert.Equal(t, p.ProviderSessionID, bound[0].ProviderSessionID)

	again, err := rt.Prepare(context.Background())
	require.NoError(t, err, "prepare is idempotent")
	assert.Equal(t, p.ProviderSessionID, again.ProviderSessionID)
}

func TestDirectives(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rt, _ := f.start(t)

	t.Run("echo replies through the final-text fallback", func(t *testing.T) {
		turn := turnOf("hello there")
		res := run(t, rt, turn)
		require.Equal(t, domain.TurnComplete, res.Outcome)
		require.Len(t, res.Plan.Settles, 1)
		assert.Equal(t, provider.Settle{MessageID: turn.Messages[0].ID, How: domain.SettledReply,
			Text: "echo: hello there", Fallback: true}, res.Plan.Settles[0])
		kinds := f.rec.kinds(turn.ID)
		assert.Equal(t, domain.AgentTurnStarted, kinds[0])
		assert.Equal(t, domain.AgentTurnComplete, kinds[len(kinds)-1])
		assert.Contains(t, kinds, domain.AgentTextDelta)
		assert.Contains(t, kinds, domain.AgentTextFinal)
	})

	t.Run("events carry session, generation, turn and a per-turn sequence", func(t *testing.T) {
		turn := turnOf("seq")
		run(t, rt, turn)
		f.rec.mu.Lock()
		defer f.rec.mu.Unlock()
		var seq int64
		for _, e := range f.rec.events {
			if e.TurnID != turn.ID {
				continue
			}
			assert.Equal(t, f.spec.RuntimeSession, e.RuntimeSession)
			assert.Equal(t, int64(1), e.Generation)
			assert.Equal(t, turn.Messages[0].ID, *e.SourceMessageID)
			assert.False(t, e.DispositionCapable, "ACP has no disposition tools")
			seq++
			assert.Equal(t, seq, e.Seq)
		}
		assert.Greater(t, seq, int64(2))
	})

	t.Run("thoughts and tool calls", func(t *testing.T) {
		turn := turnOf("look [[thoughts]] [[tools]]")
		res := run(t, rt, turn)
		require.Equal(t, domain.TurnComplete, res.Outcome)
		thoughts := f.rec.find(turn.ID, domain.AgentThought)
		require.NotEmpty(t, thoughts)
		assert.Equal(t, "thinking about it", thoughts[0].Text)
		calls := f.rec.find(turn.ID, domain.AgentToolCall)
		require.Len(t, calls, 1)
		assert.Equal(t, provider.ToolCall{ID: "tool_1", Title: "Reading files", Kind: "read", Status: "pending"}, *calls[0].Tool)
		results := f.rec.find(turn.ID, domain.AgentToolResult)
		require.Len(t, results, 1)
		assert.Equal(t, "completed", results[0].Tool.Status)
	})

	t.Run("usage is reported without fabricated categories and usage_update is a status line", func(t *testing.T) {
		turn := turnOf("count tokens [[usage]]")
		res := run(t, rt, turn)
		require.Equal(t, domain.TurnComplete, res.Outcome)
		usage := f.rec.find(turn.ID, domain.AgentUsage)
		require.Len(t, usage, 1)
		u := usage[0].Usage
		assert.Equal(t, int64(100), *u.InputTokens)
		assert.Equal(t, int64(20), *u.OutputTokens)
		assert.Nil(t, u.CachedInputTokens, "omitted categories stay nil")
		assert.Nil(t, u.ReasoningTokens)
		status := f.rec.find(turn.ID, domain.AgentStatus)
		require.NotEmpty(t, status)
		assert.Equal(t, "context 1234/200000 tokens", status[0].Text)
	})

	t.Run("a silent turn stages a synthetic no-reply", func(t *testing.T) {
		turn := turnOf("[[silent]]")
		res := run(t, rt, turn)
		require.Equal(t, domain.TurnComplete, res.Outcome)
		assert.Equal(t, []provider.Settle{{MessageID: turn.Messages[0].ID, How: domain.SettledAck}}, res.Plan.Settles)
		staged := f.rec.find(turn.ID, domain.AgentDispositionStaged)
		require.Len(t, staged, 1)
		assert.True(t, staged[0].Disposition.Synthetic)
		kinds := f.rec.kinds(turn.ID)
		assert.Equal(t, domain.AgentTurnComplete, kinds[len(kinds)-1], "the disposition precedes TurnComplete")
	})

	t.Run("a failed turn settles nothing", func(t *testing.T) {
		turn := turnOf("[[fail]]")
		res := run(t, rt, turn)
		assert.Equal(t, domain.TurnFailed, res.Outcome)
		assert.Error(t, res.Err)
		assert.Empty(t, res.Plan.Settles)
		assert.Equal(t, []uuid.UUID{turn.Messages[0].ID}, res.Plan.Unsettled)
		assert.NotEmpty(t, f.rec.find(turn.ID, domain.AgentError))
	})

	t.Run("several messages: the reply answers the newest and acks the rest", func(t *testing.T) {
		turn := turnOf("first", "second")
		res := run(t, rt, turn)
		require.Len(t, res.Plan.Settles, 2)
		assert.Equal(t, domain.SettledAck, res.Plan.Settles[0].How)
		assert.Equal(t, provider.Settle{MessageID: turn.Messages[1].ID, How: domain.SettledReply, Text: "echo: second", Fallback: true}, res.Plan.Settles[1])
	})

	t.Run("bad provider output is dropped without breaking the runtime", func(t *testing.T) {
		turn := turnOf("still here [[garbage]]")
		res := run(t, rt, turn)
		require.Equal(t, domain.TurnComplete, res.Outcome)
		assert.Equal(t, "echo: still here", res.Plan.Settles[0].Text)
		assert.True(t, rt.Liveness().TransportOpen)
		res = run(t, rt, turnOf("after"))
		assert.Equal(t, "echo: after", res.Plan.Settles[0].Text)
	})

	t.Run("steering is refused so the message carries over", func(t *testing.T) {
		assert.ErrorIs(t, rt.Steer(context.Background(), nil), provider.ErrSteerUnsupported)
	})
}

func TestPreambleRidesOnTheFirstPromptAndWhenItChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.spec.Briefing = "Always answer in haiku."
	rt, _ := f.start(t)
	// The test agent echoes only the last message block, so the preamble never leaks into
	// the reply while it rides on the prompt.
	res := run(t, rt, turnOf("one"))
	assert.Equal(t, "echo: one", res.Plan.Settles[0].Text)
	res = run(t, rt, turnOf("two"))
	assert.Equal(t, "echo: two", res.Plan.Settles[0].Text)
}

func TestExactResumeAfterTheAgentProcessRestarts(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	f := newFixtureIn(t, state)
	rt, p := f.start(t)
	for i := 0; i < 2; i++ {
		res := run(t, rt, turnOf("[[count]]"))
		assert.Equal(t, fmt.Sprintf("turns remembered: %d", i), res.Plan.Settles[0].Text)
	}
	pid := rt.Liveness().PID
	require.NoError(t, rt.Teardown(context.Background(), domain.CheckpointBeforeStop))
	groupGone(t, pid)

	g := newFixtureIn(t, state)
	g.spec.RuntimeSession, g.spec.Generation, g.spec.ProviderSessionID = f.spec.RuntimeSession, 2, p.ProviderSessionID
	rt2, p2 := g.start(t)
	assert.True(t, p2.Resumed)
	assert.Equal(t, p.ProviderSessionID, p2.ProviderSessionID)
	assert.Empty(t, g.rec.find("", domain.AgentProviderSessionBound), "a resumed session is not a new binding")
	res := run(t, rt2, turnOf("[[count]]"))
	assert.Equal(t, "turns remembered: 2", res.Plan.Settles[0].Text, "the same conversation continues")
}

func TestExactResumeThroughSessionResumeWhenLoadIsNotAdvertised(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	f := newFixtureIn(t, state, "--no-load")
	rt, p := f.start(t)
	run(t, rt, turnOf("[[count]]"))
	require.NoError(t, rt.Teardown(context.Background(), domain.CheckpointBeforeStop))

	g := newFixtureIn(t, state, "--no-load")
	g.spec.ProviderSessionID = p.ProviderSessionID
	rt2, p2 := g.start(t)
	assert.True(t, p2.Resumed)
	res := run(t, rt2, turnOf("[[count]]"))
	assert.Equal(t, "turns remembered: 1", res.Plan.Settles[0].Text)
}

func TestExactResumeFailsClosed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
	}{
		{"an unknown session is not replaced by a fresh one", nil},
		{"an agent that can neither load nor resume", []string{"--no-load", "--no-resume"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.args...)
			f.spec.ProviderSessionID = "tas_" + strings.Repeat("0", 24)
			rt, err := acp.New(f.spec)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err = rt.Prepare(ctx)
			require.ErrorIs(t, err, provider.ErrExactResumeUnavailable)
			assert.Empty(t, f.rec.find("", domain.AgentProviderSessionBound), "no silent fresh thread")
			assert.False(t, rt.Liveness().ProcessAlive, "the failed prepare reaped its child")
		})
	}
}

func TestCancelInterruptsASlowTurn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rt, _ := f.start(t)
	for _, how := range []string{"context", "interrupt"} {
		t.Run(how, func(t *testing.T) {
			turn := turnOf("[[slow 30]]")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				require.Eventually(t, func() bool { return len(f.rec.find(turn.ID, domain.AgentTurnStarted)) > 0 },
					10*time.Second, 10*time.Millisecond)
				time.Sleep(200 * time.Millisecond)
				if how == "context" {
					cancel()
				} else {
					_ = rt.Interrupt(context.Background())
				}
			}()
			start := time.Now()
			res, err := rt.RunTurn(ctx, turn)
			require.NoError(t, err)
			assert.Equal(t, domain.TurnCancelled, res.Outcome)
			assert.Less(t, time.Since(start), 5*time.Second)
			assert.Empty(t, res.Plan.Settles)
		})
	}
	res := run(t, rt, turnOf("after cancel"))
	assert.Equal(t, "echo: after cancel", res.Plan.Settles[0].Text, "the session continues after a cancelled turn")
}

func TestASecondConcurrentTurnIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rt, _ := f.start(t)
	first := turnOf("[[slow 2]]")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = rt.RunTurn(context.Background(), first)
	}()
	wait.Eventually(t, 10*time.Second, func() bool { return len(f.rec.find(first.ID, domain.AgentTurnStarted)) > 0 }, "the first turn to start")
	_, err := rt.RunTurn(context.Background(), turnOf("second"))
	assert.ErrorIs(t, err, provider.ErrTurnInProgress)
	<-done
}

// broker answers permission requests with a fixed decision and records them.
type broker struct {
	decision domain.PermissionDecision
	mu       sync.Mutex
	asked    []provider.PermissionRequest
}

func (b *broker) Request(_ context.Context, req provider.PermissionRequest) (provider.PermissionAnswer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, req)
	return provider.PermissionAnswer{ID: uuid.New(), Decision: b.decision}, nil
}

func TestPermissionRequestsGoThroughTheBroker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		decision domain.PermissionDecision
		want     string
	}{
		{domain.PermissionAllowOnce, "permission granted"},
		{domain.PermissionAllowAlways, "permission granted"},
		{domain.PermissionDeny, "permission denied"},
	}
	for _, tc := range tests {
		t.Run(string(tc.decision), func(t *testing.T) {
			f := newFixture(t)
			b := &broker{decision: tc.decision}
			f.spec.Permissions = b
			rt, _ := f.start(t)
			turn := turnOf("[[permission execute]]")
			res := run(t, rt, turn)
			require.Equal(t, domain.TurnComplete, res.Outcome)
			assert.Equal(t, tc.want, res.Plan.Settles[0].Text)
			require.Len(t, b.asked, 1)
			assert.Equal(t, "execute", b.asked[0].ToolKey)
			assert.Equal(t, f.spec.AgentID, b.asked[0].AgentID)
			assert.Equal(t, f.spec.RoomID, b.asked[0].RoomID)
			assert.Len(t, f.rec.find(turn.ID, domain.AgentPermissionRequest), 1)
		})
	}
}

func TestWithoutABrokerPermissionIsDeniedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rt, _ := f.start(t)
	res := run(t, rt, turnOf("[[permission]]"))
	assert.Equal(t, "permission denied", res.Plan.Settles[0].Text)
}

// blockingBroker never decides: the turn's cancellation must answer the request cancelled.
type blockingBroker struct{ asked chan struct{} }

func (b *blockingBroker) Request(ctx context.Context, _ provider.PermissionRequest) (provider.PermissionAnswer, error) {
	close(b.asked)
	<-ctx.Done()
	return provider.PermissionAnswer{}, ctx.Err()
}

func TestCancellingATurnCancelsItsPendingPermission(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := &blockingBroker{asked: make(chan struct{})}
	f.spec.Permissions = b
	rt, _ := f.start(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-b.asked; cancel() }()
	res, err := rt.RunTurn(ctx, turnOf("[[permission]]"))
	require.NoError(t, err)
	assert.Equal(t, domain.TurnCancelled, res.Outcome)
}

func TestCrashMidTurnFailsTheTurnAndLeavesNoProcess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rt, _ := f.start(t)
	pid := rt.Liveness().PID
	turn := turnOf("[[crash]]")
	res := run(t, rt, turn)
	assert.Equal(t, domain.TurnFailed, res.Outcome)
	assert.ErrorIs(t, res.Err, provider.ErrRuntimeExited)
	assert.Equal(t, []uuid.UUID{turn.Messages[0].ID}, res.Plan.Unsettled, "the message stays queued")
	select {
	case <-rt.Exited():
	case <-time.After(5 * time.Second):
		t.Fatal("Exited did not close")
	}
	require.NoError(t, rt.Teardown(context.Background(), domain.CheckpointBeforeStop))
	groupGone(t, pid)
	_, err := rt.RunTurn(context.Background(), turnOf("x"))
	assert.ErrorIs(t, err, provider.ErrNotPrepared)
}

func TestTeardownReapsTheWholeProcessGroup(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "--grandchild")
	rt, _ := f.start(t)
	pid := rt.Liveness().PID
	res := run(t, rt, turnOf("[[grandchild]]"))
	require.Equal(t, domain.TurnComplete, res.Outcome)
	n, err := provider.ProcessGroupMembers(pid)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 3, "the agent and its grandchildren share its group")
	require.NoError(t, rt.Teardown(context.Background(), domain.CheckpointBeforeStop))
	groupGone(t, pid)
	require.NoError(t, rt.Teardown(context.Background(), domain.CheckpointBeforeStop), "teardown is idempotent")
	assert.False(t, rt.Liveness().ProcessAlive)
}

func TestARetiredInstanceEmitsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rt, _ := f.start(t)
	require.NoError(t, rt.Teardown(context.Background(), domain.CheckpointBeforeStop))
	f.rec.mu.Lock()
	n := len(f.rec.events)
	f.rec.mu.Unlock()
	_, err := rt.RunTurn(context.Background(), turnOf("late"))
	require.ErrorIs(t, err, provider.ErrNotPrepared)
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	assert.Len(t, f.rec.events, n)
}

// muteAgent is a runtime of an "agent" that never answers initialize and starts a
// grandchild; spawned receives its process group.
func muteAgent(t *testing.T) (rt provider.Runtime, spawned <-chan int) {
	t.Helper()
	return muteAgentReadyIn(t, 0)
}

func muteAgentReadyIn(t *testing.T, ready time.Duration) (rt provider.Runtime, spawned <-chan int) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "mute-agent")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\nsleep 120 &\nexec sleep 120\n"), 0o755))
	pids := make(chan int, 1)
	rt, err := acp.New(provider.Spec{RuntimeSession: uuid.New(), Generation: 1, Transport: domain.TransportACP,
		Executable: script, Dir: dir, ReadyTimeout: ready, Spawner: provider.SpawnFunc(func(ctx context.Context, c provider.Command) (*provider.Child, error) {
			ch, err := provider.Spawn(ctx, c)
			if err == nil {
				pids <- ch.PID()
			}
			return ch, err
		})})
	require.NoError(t, err)
	return rt, pids
}

// Issue 17: `/bin/sleep 3600` as a provider sat in "starting" for the whole activity. The
// readiness bound holds even under a caller deadline that is much longer, fails with a
// clear error and leaves nothing running.
func TestAnAgentThatNeverAnswersInitializeFailsAtItsReadinessBound(t *testing.T) {
	t.Parallel()
	rt, spawned := muteAgentReadyIn(t, 700*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	_, err := rt.Prepare(ctx)
	require.ErrorIs(t, err, provider.ErrNotReady)
	assert.NotErrorIs(t, err, provider.ErrExactResumeUnavailable)
	assert.Contains(t, err.Error(), "did not finish its start handshake within 700ms")
	assert.Less(t, time.Since(start), 700*time.Millisecond+provider.ChildShutdownGrace+time.Second)
	groupGone(t, <-spawned)
}

func TestCancelledPrepareReapsWhatItStarted(t *testing.T) {
	t.Parallel()
	rt, spawned := muteAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	_, err := rt.Prepare(ctx)
	require.ErrorIs(t, err, context.Canceled)
	groupGone(t, <-spawned)
}

// An agent that ignores session/cancel would stream the abandoned turn's text into the
// session, where the next turn would read it as its own; the adapter kills it instead.
func TestAnAgentIgnoringCancelIsKilledAndLeaksNothing(t *testing.T) {
	saved := acp.CancelGrace
	acp.CancelGrace = 300 * time.Millisecond
	t.Cleanup(func() { acp.CancelGrace = saved })
	f := newFixture(t)
	rt, prepared := f.start(t)
	turn := turnOf("[[stubborn 2]]")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancel once the agent holds the prompt (its thought says so): a cancel right after
		// TurnStarted can precede the send, and a turn cancelled before it is sent never
		// reaches the agent, which is then not killed.
		require.Eventually(t, func() bool { return len(f.rec.find(turn.ID, domain.AgentThought)) > 0 },
			10*time.Second, 10*time.Millisecond)
		cancel()
	}()
	start := time.Now()
	res, err := rt.RunTurn(ctx, turn)
	require.NoError(t, err)
	assert.Equal(t, domain.TurnCancelled, res.Outcome)
	assert.Empty(t, res.Plan.Settles)
	assert.Less(t, time.Since(start), 1900*time.Millisecond, "the turn ended before the agent's late text")
	select {
	case <-rt.Exited():
	case <-time.After(5 * time.Second):
		t.Fatal("the stubborn agent was not killed")
	}
	groupGone(t, prepared.PID)
	// Past the moment the agent would have sent its late text.
	wait.Never(t, 2500*time.Millisecond, func() bool {
		f.rec.mu.Lock()
		defer f.rec.mu.Unlock()
		for _, e := range f.rec.events {
			if strings.Contains(e.Text, "late text") {
				return true
			}
		}
		return false
	}, "the cancelled turn's late text recorded as an event")
	_, err = rt.RunTurn(context.Background(), turnOf("next"))
	require.ErrorIs(t, err, provider.ErrRuntimeExited)
}

func TestATurnCancelledBeforeItIsSentNeverReachesTheAgent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rt, _ := f.start(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := rt.RunTurn(ctx, turnOf("[[count]]"))
	require.NoError(t, err)
	assert.Equal(t, domain.TurnCancelled, res.Outcome)
	res = run(t, rt, turnOf("[[count]]"))
	require.Len(t, res.Plan.Settles, 1)
	assert.Equal(t, "turns remembered: 0", res.Plan.Settles[0].Text, "the cancelled turn never reached the agent")
}

// Teardown must not wait out a handshake that hangs: it ends the Prepare in flight, which
// reaps what it started.
func TestTeardownEndsAHungPrepare(t *testing.T) {
	t.Parallel()
	rt, spawned := muteAgent(t)
	prepared := make(chan error, 1)
	go func() {
		_, err := rt.Prepare(context.Background())
		prepared <- err
	}()
	pid := <-spawned
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	require.NoError(t, rt.Teardown(context.Background(), domain.CheckpointBeforeStop))
	assert.Less(t, time.Since(start), 10*time.Second, "teardown waited out the handshake")
	require.Error(t, <-prepared)
	groupGone(t, pid)
	_, err := rt.Prepare(context.Background())
	require.ErrorIs(t, err, provider.ErrNotPrepared, "a torn-down runtime never prepares again")
}
