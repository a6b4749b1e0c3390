package codex_test

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
	"github.com/jam-dev/jam/internal/provider/codex"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// These tests drive the real `codex app-server` (npm @openai/codex, pinned in .ci/run)
// against the scripted model server, through the template settings an operator uses to
// point Codex at a model provider.

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

// fixture is a Codex home, a workspace and a model server for one test.
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
	exe := realagent.Require(t, "codex")
	model, err := stubmodel.Start(respond)
	require.NoError(t, err)
	t.Cleanup(func() { _ = model.Close() })
	return &fixture{t: t, exe: exe, model: model, home: t.TempDir(), dir: t.TempDir(), set: map[string]string{
		domain.SettingKeyModel:           stubmodel.Model,
		domain.SettingKeyProviderBaseURL: model.URL + "/v1",
		domain.SettingKeyProviderEnvKey:  "STUB_MODEL_KEY",
	}}
}

func (f *fixture) spec(thread string, rec *recorder) provider.Spec {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + f.home, "CODEX_HOME=" + filepath.Join(f.home, "codex"), "STUB_MODEL_KEY=x"}
	return provider.Spec{RuntimeSession: uuid.New(), Generation: 1, AgentID: uuid.New(), RoomID: uuid.New(),
		Transport: domain.TransportCodexAppServer, Executable: f.exe.Path, Args: []string{"app-server"}, Env: env, Dir: f.dir,
		ProviderSessionID: thread, Settings: f.set, Permissions: f.broker, Events: rec.sink, ReadyTimeout: time.Minute}
}

func (f *fixture) start(thread string) (provider.Runtime, provider.Prepared, *recorder) {
	f.t.Helper()
	require.NoError(f.t, os.MkdirAll(filepath.Join(f.home, "codex"), 0o700))
	rec := &recorder{}
	rt, err := codex.New(f.spec(thread, rec))
	require.NoError(f.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := rt.Prepare(ctx)
	require.NoError(f.t, err, "codex %s", f.exe.Version)
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

// replyOf is the settlement of message id in a plan.
func replyOf(p provider.Plan, id uuid.UUID) (provider.Settle, bool) {
	for _, s := range p.Settles {
		if s.MessageID == id {
			return s, true
		}
	}
	return provider.Settle{}, false
}

func TestCodexAnswersThroughItsReplyToolAndResumesTheThreadInANewProcess(t *testing.T) {
	t.Parallel()
	f := newFixture(t, stubmodel.ReplyTool)
	rt, p, rec := f.start("")
	assert.NotEmpty(t, p.ProviderSessionID)
	assert.Equal(t, f.exe.Version, p.Version)
	assert.Equal(t, "Codex", p.Identity)

	first := human("what is the plan?")
	res := run(t, rt, first)
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
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

	// A new process resumes the same thread: the model sees the first turn.
	rt2, p2, _ := f.start(p.ProviderSessionID)
	assert.True(t, p2.Resumed)
	assert.Equal(t, p.ProviderSessionID, p2.ProviderSessionID)
	before := len(f.model.Requests())
	second := human("and then?")
	res = run(t, rt2, second)
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	_, ok = replyOf(res.Plan, second.ID)
	assert.True(t, ok)
	next := f.model.Requests()[before]
	assert.Contains(t, next.AllText(), "what is the plan?")
	assert.Contains(t, next.LastUser(), "and then?")
}

func TestAResumeOfAThreadCodexDoesNotHaveFailsClosed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, stubmodel.ReplyTool)
	rec := &recorder{}
	rt, err := codex.New(f.spec("0190d0c5-0000-7000-8000-000000000000", rec))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(f.home, "codex"), 0o700))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = rt.Prepare(ctx)
	require.ErrorIs(t, err, provider.ErrExactResumeUnavailable)
}

// A turn that ends without a disposition falls back to the final text for a human's
// message, and posts nothing for another agent's (two agents must not loop).
func TestATurnWithoutADispositionFallsBackOnlyForHumans(t *testing.T) {
	t.Parallel()
	f := newFixture(t, stubmodel.Echo)
	rt, _, _ := f.start("")
	h := human("hello")
	res := run(t, rt, h)
	s, ok := replyOf(res.Plan, h.ID)
	require.True(t, ok)
	assert.True(t, s.Fallback)
	assert.Equal(t, "stub: [message 1 of 1] id="+h.ID.String()+" from=ada (human)", s.Text)

	other := uuid.New()
	a := provider.Message{ID: uuid.New(), AuthorKind: domain.ParticipantAgent, AuthorAgentID: &other, AuthorName: "bot", Text: "ping"}
	res = run(t, rt, a)
	for _, s := range res.Plan.Settles {
		assert.NotEqual(t, domain.SettledReply, s.How, "an agent's message got a fallback reply: %+v", s)
	}
	assert.NotEmpty(t, res.Plan.Thought)
}

// A message that arrives while the model streams is steered into the same turn: the
// model's next request holds it and both are settled by the one turn.
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

// An interrupt ends a slow turn as Cancelled at once and settles nothing.
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
	assert.Less(t, time.Since(start), codex.InterruptGrace)
	// The thread still serves the next turn.
	f.model.SetResponder(stubmodel.ReplyTool)
	res = run(t, rt, human("again"))
	assert.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
}

// When the thread no longer fits the context window Codex compacts it once and retries;
// when that fails too the human gets an apology rather than silence.
func TestAFullContextWindowIsCompactedThenApologizedFor(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	n := 0
	f := newFixture(t, func(r stubmodel.Request) stubmodel.Reply {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 2 {
			return stubmodel.Reply{Text: "summary of the conversation"} // the compaction's own request
		}
		return stubmodel.Reply{Fail: stubmodel.FailContextLength}
	})
	rt, _, rec := f.start("")
	h := human("a long question")
	res := run(t, rt, h)
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	s, ok := replyOf(res.Plan, h.ID)
	require.True(t, ok)
	assert.Contains(t, s.Text, "context window")
	assert.GreaterOrEqual(t, rec.count(domain.AgentCompaction), 1)
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

// A command Codex wants to run under an untrusted approval policy reaches the permission
// broker; a denial is what Codex hears.
func TestACommandApprovalReachesThePermissionBroker(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	f := newFixture(t, func(r stubmodel.Request) stubmodel.Reply {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return stubmodel.Reply{ToolCall: &stubmodel.ToolCall{Name: "exec_command", Arguments: map[string]any{"cmd": "touch created-by-codex"}}}
		}
		return stubmodel.Reply{Text: "could not"}
	})
	b := &broker{ans: domain.PermissionDeny}
	f.broker = b
	f.set[domain.SettingKeyApprovalPolicy] = "untrusted"
	rt, _, rec := f.start("")
	res := run(t, rt, human("make a file"))
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Len(t, b.reqs, 1)
	assert.Equal(t, "execute", b.reqs[0].ToolKey)
	assert.Contains(t, b.reqs[0].Title, "touch created-by-codex")
	assert.Equal(t, 1, rec.count(domain.AgentPermissionRequest))
	_, err := os.Stat(filepath.Join(f.dir, "created-by-codex"))
	assert.True(t, os.IsNotExist(err), "a denied command ran")
}

// A Shared host runs ONE app-server for its member rooms: each room has its own thread, the
// model's tool calls reach the room whose thread made them, and the process lives until the
// last room leaves.
func TestTheRoomsOfASharedHostShareOneAppServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, stubmodel.ReplyTool)
	host := uuid.New()
	start := func() (provider.Runtime, provider.Prepared) {
		rec := &recorder{}
		spec := f.spec("", rec)
		spec.SharedHost = host
		rt, err := codex.New(spec)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(f.home, "codex"), 0o700))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p, err := rt.Prepare(ctx)
		require.NoError(t, err)
		return rt, p
	}
	a, pa := start()
	b, pb := start()
	assert.Equal(t, pa.PID, pb.PID, "one process for the host")
	assert.NotEqual(t, pa.ProviderSessionID, pb.ProviderSessionID, "a thread per room")

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

	require.NoError(t, a.Teardown(context.Background(), domain.CheckpointBeforeStop))
	assert.True(t, b.Liveness().ProcessAlive, "the other room's process went with the first")
	res := run(t, b, human("still here"))
	assert.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	require.NoError(t, b.Teardown(context.Background(), domain.CheckpointBeforeStop))
	wait.Eventually(t, 10*time.Second, func() error {
		if n, err := provider.ProcessGroupMembers(pa.PID); err != nil || n != 0 {
			return fmt.Errorf("%d members (%v)", n, err)
		}
		return nil
	}, "the app-server to end with the host's last room")
}
