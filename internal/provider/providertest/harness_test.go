package providertest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/testsupport/gobuild"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
	"github.com/jam-dev/jam/internal/tools"
)

// Bounds of the suite: a start handshake, a turn, and how long a refusal or a failure may
// take to be said (a hang is a failure, not a slow pass).
const (
	readyBound   = 90 * time.Second
	turnBound    = 2 * time.Minute
	refusalBound = 5 * time.Second
	// failBound covers an adapter noticing its child is gone (the child's stdio drains
	// within provider.ChildShutdownGrace and a reaping delay).
	failBound = 20 * time.Second
)

// lanes is how many lanes run at once unless -test.parallel says otherwise (a lane waiting
// for its adapter's maxLanes holds one). A lane's time is mostly spent waiting on the CLI and
// the scripted model, but a Node CLI's start costs a core for a second or more: more lanes
// than this on two cores only slow every one down.
const lanes = 8

var wrapper = &gobuild.Program{Pkg: "./cmd/jam-testwrap", Name: "jam-testwrap"}

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(lanes))
	}
	code := m.Run()
	testagent.Cleanup()
	wrapper.Cleanup()
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

// count is how many events of kind the turn emitted (every turn's when turn is "").
func (r *recorder) count(turn string, kind domain.AgentEventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == kind && (turn == "" || e.TurnID == turn) {
			n++
		}
	}
	return n
}

// broker decides every permission request the same way, recording each.
type broker struct {
	mu       sync.Mutex
	decision domain.PermissionDecision
	asked    []provider.PermissionRequest
}

func (b *broker) Request(_ context.Context, req provider.PermissionRequest) (provider.PermissionAnswer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, req)
	return provider.PermissionAnswer{ID: uuid.New(), Decision: b.decision, Reason: "not in this suite"}, nil
}

func (b *broker) requests() []provider.PermissionRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]provider.PermissionRequest(nil), b.asked...)
}

// lane is one adapter's runtimes for a group of scenarios: the real binary, a scripted
// model, the provider's home, state and workspace, Jam's MCP endpoint and a broker that
// denies.
type lane struct {
	t   *testing.T
	a   adapter
	exe string
	// exeVersion is the version the binary reported ("" for jam-testagent).
	exeVersion string
	model      *stubmodel.Server
	script     *script
	home       string
	state      string
	dir        string
	broker     *broker
	mcp        *tools.MCPServer
	mcpURL     string
	// wrap runs the binary under jam-testwrap with these settings (nil: directly).
	wrap map[string]string
	// spawned receives the pid of every child the lane's runtimes start.
	spawned chan int
}

func newLane(t *testing.T, a adapter) *lane {
	t.Helper()
	var exe, version string
	if a.command == "" {
		exe = testagent.Binary(t)
	} else {
		r := realagent.Require(t, a.command)
		exe, version = r.Path, r.Version
	}
	l := &lane{t: t, a: a, exe: exe, exeVersion: version, home: t.TempDir(), state: t.TempDir(), dir: t.TempDir(),
		broker: &broker{decision: domain.PermissionDeny}, spawned: make(chan int, 16)}
	for _, d := range []string{"codex", "copilot"} {
		require.NoError(t, os.MkdirAll(filepath.Join(l.home, d), 0o700))
	}
	l.script = newScript(a, l.dir)
	model, err := stubmodel.Start(l.script.respond)
	require.NoError(t, err)
	t.Cleanup(func() { _ = model.Close() })
	l.model = model
	l.mcp = tools.NewMCPServer(nil)
	mux := http.NewServeMux()
	mux.Handle(tools.MCPPath, l.mcp)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	l.mcpURL = srv.URL + tools.MCPPath
	if a.warm != nil {
		v, _ := warmed.LoadOrStore(a.name, &warming{})
		w := v.(*warming)
		w.once.Do(func() { w.err = a.warm(l) })
		require.NoError(t, w.err)
		// The lane's own children are the ones its scenarios look for.
		for len(l.spawned) > 0 {
			<-l.spawned
		}
	}
	return l
}

// warmed holds each adapter's warm-up (adapter.warm), run once per test binary.
var warmed sync.Map

type warming struct {
	once sync.Once
	err  error
}

// wrapped makes the lane's runtimes run their binary under jam-testwrap with settings
// (JAM_TESTWRAP_* variables without the prefix).
func (l *lane) wrapped(settings map[string]string) {
	l.wrap = settings
}

// instance is one runtime of a lane with its events.
type instance struct {
	rt   provider.Runtime
	rec  *recorder
	spec provider.Spec
}

// build makes an unprepared runtime resuming thread (new when ""), with Jam's tools bound.
func (l *lane) build(thread string, gen int64) *instance {
	l.t.Helper()
	rec := &recorder{}
	spec := provider.Spec{RuntimeSession: uuid.New(), Generation: gen, AgentID: uuid.New(), RoomID: uuid.New(),
		Transport: l.a.transport, Executable: l.exe, Args: l.a.args(l), Env: l.a.env(l), Dir: l.dir,
		ProviderSessionID: thread, Permissions: l.broker, Events: rec.sink, ReadyTimeout: readyBound,
		Briefing: "You answer questions in a Jam room."}
	if l.a.settings != nil {
		spec.Settings = l.a.settings(l)
	}
	if l.a.stateDir {
		spec.StateDir = l.state
	}
	if l.wrap != nil {
		spec.Executable = wrapper.Binary(l.t)
		spec.Env = append(spec.Env, "JAM_TESTWRAP_EXEC="+l.exe)
		if l.a.framing != "" {
			spec.Env = append(spec.Env, "JAM_TESTWRAP_FRAMING="+l.a.framing)
		}
		for k, v := range l.wrap {
			spec.Env = append(spec.Env, "JAM_TESTWRAP_"+k+"="+v)
		}
	}
	spec.Spawner = provider.SpawnFunc(func(ctx context.Context, c provider.Command) (*provider.Child, error) {
		ch, err := provider.Spawn(ctx, c)
		if err == nil {
			select {
			case l.spawned <- ch.PID():
			default:
			}
		}
		return ch, err
	})
	sess := tools.Builtin().Session(tools.Identity{AgentID: spec.AgentID, RoomID: spec.RoomID,
		RuntimeSession: spec.RuntimeSession, Generation: gen}, nil, domain.ScopeSettle)
	spec.Tools = sess
	if l.a.mcp {
		tok, err := l.mcp.Issue(sess)
		require.NoError(l.t, err)
		spec.MCP = &provider.MCPEndpoint{Name: tools.MCPServerName, URL: l.mcpURL, Token: tok}
	}
	rt, err := l.a.factory(spec)
	require.NoError(l.t, err)
	stager, ok := rt.(provider.DispositionStager)
	require.True(l.t, ok, "%s runtime stages no dispositions", l.a.name)
	sess.Bind(stager)
	l.t.Cleanup(func() { _ = rt.Teardown(context.Background(), domain.CheckpointBeforeStop) })
	return &instance{rt: rt, rec: rec, spec: spec}
}

// prepare prepares in under its readiness bound.
func (in *instance) prepare() (provider.Prepared, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readyBound+10*time.Second)
	defer cancel()
	return in.rt.Prepare(ctx)
}

// start builds and prepares a runtime, failing the test when it cannot.
func (l *lane) start(thread string, gen int64) (*instance, provider.Prepared) {
	l.t.Helper()
	in := l.build(thread, gen)
	p, err := in.prepare()
	require.NoError(l.t, err, "%s (%s)", l.a.name, l.exe)
	return in, p
}

func human(text string) provider.Message {
	return provider.Message{ID: uuid.New(), AuthorKind: domain.ParticipantHuman, AuthorName: "ada", Text: text}
}

func turnOf(msgs ...provider.Message) provider.Turn {
	return provider.Turn{ID: uuid.NewString(), Messages: msgs}
}

// run runs a turn that must return (not error) within turnBound.
func run(t *testing.T, rt provider.Runtime, turn provider.Turn) provider.TurnResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), turnBound)
	defer cancel()
	res, err := rt.RunTurn(ctx, turn)
	require.NoError(t, err)
	return res
}

// settleOf is the settlement of message id in a plan.
func settleOf(p provider.Plan, id uuid.UUID) (provider.Settle, bool) {
	for _, s := range p.Settles {
		if s.MessageID == id {
			return s, true
		}
	}
	return provider.Settle{}, false
}

// groupGone waits for the process group pgid to have no live member.
func groupGone(t *testing.T, pgid int) {
	t.Helper()
	wait.Eventually(t, failBound, func() error {
		if n, err := provider.ProcessGroupMembers(pgid); err != nil || n != 0 {
			return fmt.Errorf("%d members (%v)", n, err)
		}
		return nil
	}, "process group %d to have no members", pgid)
}

// exited waits for the runtime's Exited channel.
func exited(t *testing.T, rt provider.Runtime) {
	t.Helper()
	select {
	case <-rt.Exited():
	case <-time.After(failBound):
		t.Fatalf("Exited did not close within %v", failBound)
	}
}

// exitedErr reports whether a turn's outcome says the runtime exited: RunTurn's error, or
// a failed turn's error, classified as provider.ErrRuntimeExited.
func exitedErr(res provider.TurnResult, err error) bool {
	if err != nil {
		return errors.Is(err, provider.ErrRuntimeExited)
	}
	return res.Outcome == domain.TurnFailed && errors.Is(res.Err, provider.ErrRuntimeExited)
}
