package copilot_test

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
	"github.com/jam-dev/jam/internal/provider/copilot"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// These tests drive the real `copilot --headless --stdio` (npm @github/copilot, pinned in
// .ci/run) against the scripted model server (Chat Completions), through the template
// settings an operator uses to point Copilot at a model provider of their own.

type recorder struct {
	mu     sync.Mutex
	events []provider.AgentEvent
}

func (r *recorder) sink(e provider.AgentEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) count(kind domain.AgentEventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// fixture is a Copilot home, a workspace and a model server for one test.
type fixture struct {
	t      *testing.T
	exe    provider.ResolvedExecutable
	model  *stubmodel.Server
	home   string
	dir    string
	broker provider.PermissionBroker
	set    map[string]string
}

func newFixture(t *testing.T, respond stubmodel.Responder) *fixture {
	exe := realagent.Require(t, "copilot")
	model, err := stubmodel.Start(respond)
	require.NoError(t, err)
	t.Cleanup(func() { _ = model.Close() })
	return &fixture{t: t, exe: exe, model: model, home: t.TempDir(), dir: t.TempDir(), set: map[string]string{
		domain.SettingKeyModel:           stubmodel.Model,
		domain.SettingKeyProviderBaseURL: model.URL + "/v1",
		domain.SettingKeyProviderEnvKey:  "STUB_MODEL_KEY",
	}}
}

func (f *fixture) spec(session string, rec *recorder) provider.Spec {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + f.home, "COPILOT_HOME=" + filepath.Join(f.home, "copilot"),
		"COPILOT_AUTO_UPDATE=false", "STUB_MODEL_KEY=x"}
	return provider.Spec{RuntimeSession: uuid.New(), Generation: 1, AgentID: uuid.New(), RoomID: uuid.New(),
		Transport: domain.TransportCopilotSDK, Executable: f.exe.Path, Args: []string{"--headless", "--no-auto-update", "--stdio"},
		Env: env, Dir: f.dir, ProviderSessionID: session, Settings: f.set, Permissions: f.broker, Events: rec.sink,
		ReadyTimeout: time.Minute}
}

func (f *fixture) start(session string) (provider.Runtime, provider.Prepared, *recorder) {
	f.t.Helper()
	rec := &recorder{}
	rt, err := copilot.New(f.spec(session, rec))
	require.NoError(f.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := rt.Prepare(ctx)
	require.NoError(f.t, err, "copilot %s", f.exe.Version)
	f.t.Cleanup(func() { _ = rt.Teardown(context.Background(), domain.CheckpointBeforeStop) })
	return rt, p, rec
}

func human(text string) provider.Message {
	return provider.Message{ID: uuid.New(), AuthorKind: domain.ParticipantHuman, AuthorName: "ada", Text: text}
}

func run(t *testing.T, rt provider.Runtime, msgs ...provider.Message) provider.TurnResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := rt.RunTurn(ctx, provider.Turn{ID: uuid.NewString(), Messages: msgs})
	require.NoError(t, err)
	return res
}

func replyOf(p provider.Plan, id uuid.UUID) (provider.Settle, bool) {
	for _, s := range p.Settles {
		if s.MessageID == id {
			return s, true
		}
	}
	return provider.Settle{}, false
}

func TestCopilotAnswersThroughItsReplyToolAndResumesTheSessionInANewProcess(t *testing.T) {
	t.Parallel()
	f := newFixture(t, stubmodel.ReplyTool)
	rt, p, rec := f.start("")
	assert.Empty(t, p.ProviderSessionID, "a session with no message is not kept by Copilot, so not bound yet")
	assert.Equal(t, "GitHub Copilot", p.Identity)
	assert.NotEmpty(t, p.Version)

	first := human("what is the plan?")
	res := run(t, rt, first)
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	require.NotEmpty(t, res.ProviderSessionID, "the first turn binds the session")
	s, ok := replyOf(res.Plan, first.ID)
	require.True(t, ok, "plan %+v", res.Plan)
	assert.Equal(t, domain.SettledReply, s.How)
	assert.Equal(t, "stub: what is the plan?", s.Text)
	assert.False(t, s.Fallback, "the reply came from jam_reply_to_message")
	assert.Len(t, res.Plan.Settles, 1, "the final text is not posted a second time")
	assert.Equal(t, 1, rec.count(domain.AgentDispositionStaged))
	assert.Equal(t, 1, rec.count(domain.AgentUsage))
	req := f.model.Requests()[0]
	assert.True(t, req.Offers(domain.ToolReplyToMessage) && req.Offers(domain.ToolNoReply), "tools %v", req.Tools)
	assert.Contains(t, req.AllText(), "## Working in a Jam room")
	require.NoError(t, rt.Teardown(context.Background(), domain.CheckpointBeforeStop))

	// A new process resumes the same session: the model sees the first turn.
	rt2, p2, _ := f.start(res.ProviderSessionID)
	assert.True(t, p2.Resumed)
	assert.Equal(t, res.ProviderSessionID, p2.ProviderSessionID)
	before := len(f.model.Requests())
	second := human("and then?")
	res2 := run(t, rt2, second)
	require.Equal(t, domain.TurnComplete, res2.Outcome, "%v", res2.Err)
	assert.Empty(t, res2.ProviderSessionID, "a resumed session was bound at prepare")
	_, ok = replyOf(res2.Plan, second.ID)
	assert.True(t, ok)
	next := f.model.Requests()[before]
	assert.Contains(t, next.AllText(), "what is the plan?")
	assert.Contains(t, next.LastUser(), "and then?")
}

func TestAResumeOfASessionCopilotDoesNotHaveFailsClosed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, stubmodel.ReplyTool)
	rt, err := copilot.New(f.spec(uuid.NewString(), &recorder{}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = rt.Prepare(ctx)
	require.ErrorIs(t, err, provider.ErrExactResumeUnavailable)
	assert.False(t, rt.Liveness().ProcessAlive, "a failed prepare leaves no process")
}

// A message that arrives while the model streams is steered into the same turn (immediate
// mode): the model's next request holds it and both are settled by the one turn.
func TestAMessageArrivingMidTurnIsSteeredIntoIt(t *testing.T) {
	t.Parallel()
	var first sync.Once
	streaming := make(chan struct{})
	f := newFixture(t, func(r stubmodel.Request) stubmodel.Reply {
		reply := stubmodel.ReplyTool(r)
		first.Do(func() {
			close(streaming)
			reply.Text, reply.Chunks, reply.ChunkDelay = "thinking it over", 8, 250*time.Millisecond
		})
		return reply
	})
	rt, _, _ := f.start("")
	m1, m2 := human("first"), human("second, while you think")
	done := make(chan provider.TurnResult, 1)
	go func() { done <- run(t, rt, m1) }()
	<-streaming
	wait.Eventually(t, 10*time.Second, func() error {
		return rt.Steer(context.Background(), []provider.Message{m2})
	}, "the steer to be taken")
	res := <-done
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	for _, m := range []provider.Message{m1, m2} {
		s, ok := replyOf(res.Plan, m.ID)
		assert.True(t, ok && s.How == domain.SettledReply && !s.Fallback, "message %q: %+v", m.Text, s)
	}
	var saw bool
	for _, r := range f.model.Requests() {
		saw = saw || strings.Contains(r.AllText(), "second, while you think")
	}
	assert.True(t, saw, "the model never saw the steered message")
	assert.ErrorIs(t, rt.Steer(context.Background(), []provider.Message{human("late")}), provider.ErrNoTurn)
}

// An interrupt aborts a slow turn: it ends Cancelled at once and settles nothing, and the
// session serves the next turn.
func TestAnInterruptedTurnEndsCancelledAndSettlesNothing(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	f := newFixture(t, func(r stubmodel.Request) stubmodel.Reply {
		select {
		case started <- struct{}{}:
		default:
		}
		return stubmodel.Reply{Text: strings.Repeat("slow ", 40), Chunks: 40, ChunkDelay: time.Second}
	})
	rt, _, _ := f.start("")
	done := make(chan provider.TurnResult, 1)
	go func() { done <- run(t, rt, human("take your time")) }()
	<-started
	time.Sleep(500 * time.Millisecond) // let the stream begin
	start := time.Now()
	require.NoError(t, rt.Interrupt(context.Background()))
	res := <-done
	assert.Equal(t, domain.TurnCancelled, res.Outcome)
	assert.Empty(t, res.Plan.Settles)
	assert.Less(t, time.Since(start), copilot.InterruptGrace)
	f.model.SetResponder(stubmodel.ReplyTool)
	res = run(t, rt, human("again"))
	assert.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
}

type broker struct {
	mu   sync.Mutex
	reqs []provider.PermissionRequest
	ans  domain.PermissionDecision
}

func (b *broker) Request(_ context.Context, req provider.PermissionRequest) (provider.PermissionAnswer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reqs = append(b.reqs, req)
	return provider.PermissionAnswer{Decision: b.ans}, nil
}

// A shell command Copilot wants to run reaches the permission broker (Jam's own tools do
// not); a denial is what Copilot hears, and the command never runs.
func TestAShellCommandReachesThePermissionBroker(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	f := newFixture(t, func(r stubmodel.Request) stubmodel.Reply {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return stubmodel.Reply{ToolCall: &stubmodel.ToolCall{Name: r.ToolName("bash"),
				Arguments: map[string]any{"command": "touch created-by-copilot", "description": "make a file", "mode": "sync", "initial_wait": 10}}}
		}
		return stubmodel.ReplyTool(r)
	})
	b := &broker{ans: domain.PermissionDeny}
	f.broker = b
	rt, _, rec := f.start("")
	m := human("make a file")
	res := run(t, rt, m)
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Len(t, b.reqs, 1, "only the shell command is asked; Jam's reply tool is Jam's")
	assert.Equal(t, "execute", b.reqs[0].ToolKey)
	assert.Contains(t, b.reqs[0].Title, "touch created-by-copilot")
	assert.Equal(t, 1, rec.count(domain.AgentPermissionRequest))
	_, err := os.Stat(filepath.Join(f.dir, "created-by-copilot"))
	assert.True(t, os.IsNotExist(err), "a denied command ran")
	_, ok := replyOf(res.Plan, m.ID)
	assert.True(t, ok, "the agent carried on after the denial: plan %+v", res.Plan)
}

// A Shared host runs ONE server for its member rooms: each room has its own session, the
// model's tool calls reach the room whose session made them, and the process lives until
// the last room leaves.
func TestTheRoomsOfASharedHostShareOneServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, stubmodel.ReplyTool)
	host := uuid.New()
	start := func() (provider.Runtime, provider.Prepared) {
		spec := f.spec("", &recorder{})
		spec.SharedHost = host
		rt, err := copilot.New(spec)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p, err := rt.Prepare(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = rt.Teardown(context.Background(), domain.CheckpointBeforeStop) })
		return rt, p
	}
	a, pa := start()
	b, pb := start()
	assert.Equal(t, pa.PID, pb.PID, "one process for the host")

	var wg sync.WaitGroup
	results := make([]provider.TurnResult, 2)
	msgs := []provider.Message{human("for room a"), human("for room b")}
	for i, rt := range []provider.Runtime{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = run(t, rt, msgs[i]) }()
	}
	wg.Wait()
	for i, res := range results {
		require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
		s, ok := replyOf(res.Plan, msgs[i].ID)
		assert.True(t, ok && s.Text == "stub: "+msgs[i].Text && !s.Fallback, "room %d: %+v", i, res.Plan)
		assert.Len(t, res.Plan.Settles, 1, "room %d settled another room's message", i)
	}
	assert.NotEqual(t, results[0].ProviderSessionID, results[1].ProviderSessionID, "a session per room")

	require.NoError(t, a.Teardown(context.Background(), domain.CheckpointBeforeStop))
	assert.True(t, b.Liveness().ProcessAlive, "the other room's server went with the first")
	res := run(t, b, human("still here"))
	assert.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	require.NoError(t, b.Teardown(context.Background(), domain.CheckpointBeforeStop))
	wait.Eventually(t, 10*time.Second, func() error {
		if n, err := provider.ProcessGroupMembers(pa.PID); err != nil || n != 0 {
			return fmt.Errorf("%d members (%v)", n, err)
		}
		return nil
	}, "the server to end with the host's last room")
}
