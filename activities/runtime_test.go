package activities_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
	"github.com/jam-dev/jam/workers"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testagent.Cleanup()
	fakesbx.Cleanup()
	os.Exit(code)
}

type world struct {
	st      *store.Store
	reg     *workers.RuntimeRegistry
	acts    *activities.Runtimes
	env     *testsuite.TestActivityEnvironment
	agent   domain.Agent
	room    domain.Room
	session uuid.UUID
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	st := teststore.SQLite(t)
	now := time.Now()
	a, err := st.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: "builder", Kind: domain.AgentOwned, CreatedAt: now}, "")
	require.NoError(t, err)
	cfg := domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP,
		Args: []string{"--state-dir", t.TempDir()}}.Normalized()
	_, err = st.CreateTemplate(ctx, domain.Template{ID: uuid.New(), AgentID: a.ID, Config: cfg, CreatedAt: now})
	require.NoError(t, err)
	room, err := st.CreateRoom(ctx, domain.Room{ID: uuid.New(), Name: "lab", CreatedAt: now})
	require.NoError(t, err)
	m, err := st.AddAgentToRoom(ctx, room.ID, a.ID, now)
	require.NoError(t, err)
	_, err = st.AddHumanToRoom(ctx, room.ID, "alice", now)
	require.NoError(t, err)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := workers.NewRuntimeRegistry(log, nil, nil)
	t.Cleanup(func() { reg.Shutdown(context.Background()) })
	bin := testagent.Binary(t)
	acts := &activities.Runtimes{Store: st, Table: reg, Layout: domain.Layout{Root: t.TempDir()}, Log: log,
		Env: append(os.Environ(), provider.EnvVarFor("jam-testagent")+"="+bin)}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	return &world{st: st, reg: reg, acts: acts, env: env, agent: a, room: room, session: m.Session.RuntimeSessionID}
}

func (w *world) post(t *testing.T, text string) domain.Message {
	t.Helper()
	m, err := w.st.PostMessage(context.Background(), domain.Message{ID: uuid.New(), RoomID: w.room.ID,
		AuthorKind: domain.ParticipantHuman, AuthorHuman: "alice", Text: text, CreatedAt: time.Now()})
	require.NoError(t, err)
	return m
}

func (w *world) prepare(t *testing.T) activities.PrepareRuntimeResult {
	t.Helper()
	v, err := w.env.ExecuteActivity(w.acts.PrepareRuntime, activities.PrepareRuntimeInput{RuntimeSession: w.session})
	require.NoError(t, err)
	var p activities.PrepareRuntimeResult
	require.NoError(t, v.Get(&p))
	return p
}

func (w *world) turn(t *testing.T, gen int64) (activities.RunTurnResult, error) {
	t.Helper()
	v, err := w.env.ExecuteActivity(w.acts.RunTurn, activities.RunTurnInput{RuntimeSession: w.session, Generation: gen,
		TurnID: uuid.NewString()})
	if err != nil {
		return activities.RunTurnResult{}, err
	}
	var r activities.RunTurnResult
	require.NoError(t, v.Get(&r))
	return r, nil
}

func (w *world) replies(t *testing.T) []string {
	t.Helper()
	msgs, err := w.st.ListMessages(context.Background(), w.room.ID, 0, 100)
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		if m.AuthorKind == domain.ParticipantAgent {
			out = append(out, m.Text)
		}
	}
	return out
}

func TestRunTurnAnswersTheQueueOnceAndRecordsTheProviderSession(t *testing.T) {
	w := newWorld(t)
	p := w.prepare(t)
	assert.Equal(t, int64(1), p.Generation)
	assert.NotEmpty(t, p.ProviderSessionID)
	assert.Positive(t, p.PID)
	hs, err := w.st.GetHostSession(context.Background(), w.session)
	require.NoError(t, err)
	assert.Equal(t, p.ProviderSessionID, hs.ProviderSessionID, "the bound provider session is persisted")

	w.post(t, "hello there")
	res, err := w.turn(t, p.Generation)
	require.NoError(t, err)
	assert.Equal(t, domain.TurnComplete, res.Outcome)
	assert.Equal(t, 1, res.Settled)
	assert.Equal(t, []string{"echo: hello there"}, w.replies(t))

	// A retried activity (its first attempt committed) finds nothing left to answer.
	res, err = w.turn(t, p.Generation)
	require.NoError(t, err)
	assert.Zero(t, res.Messages)
	assert.Len(t, w.replies(t), 1, "no duplicate reply")

	events, err := w.st.ListEvents(context.Background(), 0, store.EventFilter{Room: &w.room.ID}, 1000)
	require.NoError(t, err)
	activity := 0
	for _, e := range events {
		if e.Kind == domain.EventRuntimeActivity {
			activity++
		}
	}
	assert.Positive(t, activity, "turn events reach the event log")
}

func TestRestartedRuntimeResumesTheSameProviderSession(t *testing.T) {
	w := newWorld(t)
	p1 := w.prepare(t)
	w.post(t, "one")
	_, err := w.turn(t, p1.Generation)
	require.NoError(t, err)
	_, err = w.env.ExecuteActivity(w.acts.TeardownRuntime, activities.TeardownRuntimeInput{RuntimeSession: w.session,
		Reason: domain.CheckpointBeforeStop})
	require.NoError(t, err)
	assert.Zero(t, w.reg.Len(), "teardown left nothing running")

	p2 := w.prepare(t)
	assert.Equal(t, int64(2), p2.Generation)
	assert.True(t, p2.Resumed)
	assert.Equal(t, p1.ProviderSessionID, p2.ProviderSessionID)
	w.post(t, "[[count]]")
	_, err = w.turn(t, p2.Generation)
	require.NoError(t, err)
	replies := w.replies(t)
	require.Len(t, replies, 2)
	assert.Equal(t, "turns remembered: 1", replies[1], "the agent continued the same conversation")

	// The retired generation can no longer run a turn here.
	w.post(t, "late")
	_, err = w.turn(t, p1.Generation)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, string(domain.ErrTypeRuntimeNotLive), appErr.Type())
}

func TestPrepareRefusesAnUnknownSession(t *testing.T) {
	w := newWorld(t)
	_, err := w.env.ExecuteActivity(w.acts.PrepareRuntime, activities.PrepareRuntimeInput{RuntimeSession: uuid.New()})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, string(domain.ErrTypeNoSession), appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.False(t, strings.Contains(err.Error(), "panic"))
}

// A candidate configuration starts only while its generation is the template's desired one,
// and never one that turns sandboxing on for a runtime placed host-native.
func TestACandidateConfigurationIsFencedAndKeepsItsPlacement(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	hs, err := w.st.GetHostSession(ctx, w.session)
	require.NoError(t, err)
	tmpl, err := w.st.GetTemplate(ctx, hs.TemplateID)
	require.NoError(t, err)
	boxed := tmpl.Config
	boxed.Sandbox.Enabled = true
	g1, err := w.st.SaveTemplateAndRequestApply(ctx, tmpl.ID, boxed, time.Now())
	require.NoError(t, err)
	_, err = w.env.ExecuteActivity(w.acts.PrepareRuntime, activities.PrepareRuntimeInput{RuntimeSession: w.session,
		ConfigGeneration: g1.DesiredGeneration})
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, string(domain.ErrTypeValidation), app.Type(), "a candidate that turns sandboxing on in place")
	_, err = w.st.SaveTemplateAndRequestApply(ctx, tmpl.ID, tmpl.Config, time.Now())
	require.NoError(t, err)
	_, err = w.env.ExecuteActivity(w.acts.PrepareRuntime, activities.PrepareRuntimeInput{RuntimeSession: w.session,
		ConfigGeneration: g1.DesiredGeneration})
	require.ErrorAs(t, err, &app)
	require.Equal(t, string(domain.ErrTypeSuperseded), app.Type(), "a superseded candidate")
}
