package claudecode_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
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
	"github.com/jam-dev/jam/internal/provider/claudecode"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
	"github.com/jam-dev/jam/internal/testsupport/wait"
	"github.com/jam-dev/jam/internal/tools"
)

// These tests drive the real `claude` (npm @anthropic-ai/claude-code, pinned in .ci/run)
// against the scripted model server (Anthropic Messages), with Jam's tools served by the
// real MCP server, the way a worker runs it.

// claudeModel is a model id claude accepts (it refuses an unknown one before any request).
const claudeModel = "claude-sonnet-4-5"

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

// fixture is a session's state directory, its workspace, a model server and Jam's MCP
// endpoint for one test.
type fixture struct {
	t      *testing.T
	exe    provider.ResolvedExecutable
	model  *stubmodel.Server
	mcp    *tools.MCPServer
	url    string
	state  string
	dir    string
	broker provider.PermissionBroker
	set    map[string]string
	// noTools runs without Jam's MCP endpoint.
	noTools bool
}

func newFixture(t *testing.T, respond stubmodel.Responder) *fixture {
	exe := realagent.Require(t, "claude")
	model, err := stubmodel.Start(respond)
	require.NoError(t, err)
	t.Cleanup(func() { _ = model.Close() })
	mcp := tools.NewMCPServer(nil)
	mux := http.NewServeMux()
	mux.Handle(tools.MCPPath, mcp)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &fixture{t: t, exe: exe, model: model, mcp: mcp, url: srv.URL + tools.MCPPath,
		state: t.TempDir(), dir: t.TempDir(), set: map[string]string{domain.SettingKeyModel: claudeModel}}
}

func (f *fixture) env() []string {
	row, _ := domain.LookupTransport(domain.TransportClaudeCodeCLI)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + f.state, "CLAUDE_CONFIG_DIR=" + f.state,
		"ANTHROPIC_BASE_URL=" + f.model.URL, "ANTHROPIC_API_KEY=x"}
	return append(env, row.Env...)
}

// start prepares a runtime of the session (resuming session when set), with a tool
// registry session bound to it and served over MCP with its own token.
func (f *fixture) start(session string, gen int64) (*claudecode.Runtime, provider.Prepared, *recorder, error) {
	f.t.Helper()
	rec := &recorder{}
	spec := provider.Spec{RuntimeSession: uuid.New(), Generation: gen, AgentID: uuid.New(), RoomID: uuid.New(),
		Transport: domain.TransportClaudeCodeCLI, Executable: f.exe.Path, Env: f.env(), Dir: f.dir, StateDir: f.state,
		ProviderSessionID: session, Settings: f.set, Permissions: f.broker, Events: rec.sink, ReadyTimeout: time.Minute,
		Briefing: "You review Go code."}
	var sess *tools.Session
	if !f.noTools {
		sess = tools.Builtin().Session(tools.Identity{AgentID: spec.AgentID, RoomID: spec.RoomID,
			RuntimeSession: spec.RuntimeSession, Generation: gen}, nil, domain.ScopeSettle)
		tok, err := f.mcp.Issue(sess)
		require.NoError(f.t, err)
		spec.Tools = sess
		spec.MCP = &provider.MCPEndpoint{Name: tools.MCPServerName, URL: f.url, Token: tok}
	}
	built, err := claudecode.New(spec)
	require.NoError(f.t, err)
	rt := built.(*claudecode.Runtime)
	if sess != nil {
		sess.Bind(rt)
	}
	f.t.Cleanup(func() { _ = rt.Teardown(context.Background(), domain.CheckpointBeforeStop) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := rt.Prepare(ctx)
	return rt, p, rec, err
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

func TestClaudeAnswersThroughJamsReplyToolAndResumesTheSessionInANewProcess(t *testing.T) {
	t.Parallel()
	f := newFixture(t, stubmodel.ReplyTool)
	rt, p, rec, err := f.start("", 1)
	require.NoError(t, err, "claude %s", f.exe.Version)
	assert.Empty(t, p.ProviderSessionID, "a new session is reported once its first turn wrote it")
	assert.Equal(t, "Claude Code", p.Identity)
	assert.NotEmpty(t, p.Version)
	assert.Equal(t, domain.IdleKeepAlive, rt.IdlePolicy())
	assert.Empty(t, rt.ReadinessWarning(), "Jam's tools connected")
	for _, name := range []string{"jam-mcp-g1.json", "jam-system-prompt.md"} {
		st, err := os.Stat(filepath.Join(f.state, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), name)
	}

	m := human("what is the plan?")
	res := run(t, rt, m)
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	s, ok := replyOf(res.Plan, m.ID)
	require.True(t, ok, "plan %+v", res.Plan)
	assert.Equal(t, domain.SettledReply, s.How)
	assert.Equal(t, "stub: what is the plan?", s.Text)
	assert.False(t, s.Fallback, "settled by the tool, not the final text")
	session := res.ProviderSessionID
	require.NotEmpty(t, session, "the first turn reports the session it wrote")
	assert.Equal(t, 1, rec.count(domain.AgentDispositionStaged))
	assert.Positive(t, rec.count(domain.AgentUsage))
	reqs := f.model.Requests()
	require.NotEmpty(t, reqs)
	assert.True(t, reqs[0].Offers("jam_reply_to_message"), "tools offered: %v", reqs[0].Tools)
	assert.Contains(t, reqs[0].AllText(), "You review Go code.", "the briefing is in the system prompt")
	// A second turn on the same process reports nothing new.
	assert.Empty(t, run(t, rt, human("and then?")).ProviderSessionID)

	require.NoError(t, rt.Teardown(context.Background(), domain.CheckpointBeforeStop))
	_, err = os.Stat(filepath.Join(f.state, "jam-mcp-g1.json"))
	assert.True(t, errors.Is(err, os.ErrNotExist), "the token's file outlived the instance: %v", err)

	rt2, p2, _, err := f.start(session, 2)
	require.NoError(t, err)
	assert.True(t, p2.Resumed)
	assert.Equal(t, session, p2.ProviderSessionID)
	before := len(f.model.Requests())
	m2 := human("are you still there?")
	res2 := run(t, rt2, m2)
	require.Equal(t, domain.TurnComplete, res2.Outcome, "%v", res2.Err)
	assert.Empty(t, res2.ProviderSessionID)
	r2, ok := replyOf(res2.Plan, m2.ID)
	require.True(t, ok)
	assert.Equal(t, "stub: are you still there?", r2.Text)
	after := f.model.Requests()[before:]
	require.NotEmpty(t, after)
	assert.Contains(t, after[0].AllText(), "what is the plan?", "the resumed session's request holds the first turn")
}

func TestClaudeResumeOfASessionWithoutATranscriptFailsClosed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, stubmodel.ReplyTool)
	_, _, _, err := f.start(uuid.NewString(), 1)
	require.ErrorIs(t, err, provider.ErrExactResumeUnavailable)
	_, _, _, err = f.start("--dangerous", 2)
	require.ErrorIs(t, err, provider.ErrExactResumeUnavailable, "an id that is not a UUID never reaches argv")
}

func TestClaudeTakesASteeredMessageIntoTheTurnAndStopsOnInterrupt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	slowed := map[string]bool{}
	f := newFixture(t, func(r stubmodel.Request) stubmodel.Reply {
		id, prompt := r.Unanswered()
		mu.Lock()
		defer mu.Unlock()
		if id != "" && strings.Contains(prompt, "[[slow]]") && !slowed[id] {
			slowed[id] = true
			return stubmodel.Reply{Text: "working on it", Chunks: 10, ChunkDelay: 400 * time.Millisecond}
		}
		return stubmodel.ReplyTool(r)
	})
	rt, _, _, err := f.start("", 1)
	require.NoError(t, err)

	first, second := human("[[slow]] think slowly"), human("and one more thing")
	done := make(chan provider.TurnResult, 1)
	go func() { done <- run(t, rt, first) }()
	wait.Eventually(t, time.Minute, func() bool { return len(f.model.Requests()) > 0 }, "the model to be asked")
	require.NoError(t, rt.Steer(context.Background(), []provider.Message{second}))
	res := <-done
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	for _, m := range []provider.Message{first, second} {
		s, ok := replyOf(res.Plan, m.ID)
		require.True(t, ok, "message %q not settled in the turn: %+v", m.Text, res.Plan)
		assert.Equal(t, "stub: "+m.Text, s.Text)
	}
	require.ErrorIs(t, rt.Steer(context.Background(), []provider.Message{human("late")}), provider.ErrNoTurn)

	// An interrupt ends a slow turn at once, Cancelled, settling nothing.
	ctx, cancel := context.WithCancel(context.Background())
	slow := human("[[slow]] a long job")
	go func() {
		wait.Eventually(t, time.Minute, func() bool {
			reqs := f.model.Requests()
			return strings.Contains(reqs[len(reqs)-1].AllText(), "a long job")
		}, "the model to be asked")
		cancel()
	}()
	start := time.Now()
	res, err = rt.RunTurn(ctx, provider.Turn{ID: uuid.NewString(), Messages: []provider.Message{slow}})
	require.NoError(t, err)
	assert.Equal(t, domain.TurnCancelled, res.Outcome)
	assert.Less(t, time.Since(start), claudecode.InterruptGrace, "the interrupt was not honoured")
	assert.Empty(t, res.Plan.Settles)
	assert.True(t, rt.Liveness().ProcessAlive, "an interrupt stops the turn, not claude")
	// The runtime goes on.
	next := human("still with me?")
	res = run(t, rt, next)
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	_, ok := replyOf(res.Plan, next.ID)
	assert.True(t, ok, "plan %+v", res.Plan)
}

// broker decides every permission request the same way, recording each.
type broker struct {
	decision domain.PermissionDecision
	mu       sync.Mutex
	asked    []provider.PermissionRequest
}

func (b *broker) Request(_ context.Context, req provider.PermissionRequest) (provider.PermissionAnswer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, req)
	return provider.PermissionAnswer{Decision: b.decision, Reason: "not today"}, nil
}

func TestClaudeAsksThePermissionBrokerBeforeRunningACommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		decision domain.PermissionDecision
		ran      bool
	}{{"allowed", domain.PermissionAllowOnce, true}, {"denied", domain.PermissionDeny, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls sync.Map
			var f *fixture
			f = newFixture(t, func(r stubmodel.Request) stubmodel.Reply {
				if _, done := calls.LoadOrStore("bash", true); !done {
					return stubmodel.Reply{ToolCall: &stubmodel.ToolCall{Name: "Bash",
						Arguments: map[string]any{"command": "touch " + filepath.Join(f.dir, "made-by-claude"), "description": "make a file"}}}
				}
				return stubmodel.ReplyTool(r)
			})
			b := &broker{decision: tc.decision}
			f.broker = b
			rt, _, rec, err := f.start("", 1)
			require.NoError(t, err)
			m := human("make a file")
			res := run(t, rt, m)
			require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
			_, ok := replyOf(res.Plan, m.ID)
			assert.True(t, ok)
			b.mu.Lock()
			require.Len(t, b.asked, 1, "Jam's own tools are never asked about")
			assert.Equal(t, "execute", b.asked[0].ToolKey)
			assert.Contains(t, b.asked[0].Title, "made-by-claude")
			b.mu.Unlock()
			assert.Equal(t, 1, rec.count(domain.AgentPermissionRequest))
			_, err = os.Stat(filepath.Join(f.dir, "made-by-claude"))
			assert.Equal(t, tc.ran, err == nil, "the command ran: %v", err)
			var results []string
			for _, r := range f.model.Requests() {
				results = append(results, r.ToolResults...)
			}
			require.NotEmpty(t, results, "the tool's result reached the model")
			if !tc.ran {
				assert.Contains(t, results[0], "not today", "the denial's reason reached the model")
			}
		})
	}
}

func TestClaudeWithoutJamsToolsAnswersAHumanWithItsFinalText(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(stubmodel.Request) stubmodel.Reply { return stubmodel.Reply{Text: "plain answer"} })
	f.noTools = true
	rt, _, rec, err := f.start("", 1)
	require.NoError(t, err)
	m := human("hello there")
	res := run(t, rt, m)
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	s, ok := replyOf(res.Plan, m.ID)
	require.True(t, ok, "plan %+v", res.Plan)
	assert.True(t, s.Fallback)
	assert.Equal(t, "plain answer", s.Text)
	assert.Positive(t, rec.count(domain.AgentTextDelta), "the text streams")
}
