package activities_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/checkpoint"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
	"github.com/jam-dev/jam/internal/workspace"
)

// sandboxWorld is one sandboxed Codex session with its allocated Dedicated host, and the
// node's sandbox activities over the real driver and a fake sbx.
type sandboxWorld struct {
	st      *store.Store
	acts    *activities.Sandbox
	env     *testsuite.TestActivityEnvironment
	host    domain.RuntimeHost
	session uuid.UUID
}

func newSandboxWorld(t *testing.T, auth domain.AuthMode, sbxEnv ...string) *sandboxWorld {
	t.Helper()
	ctx := context.Background()
	st := teststore.SQLite(t)
	now := time.Now()
	a, err := st.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: "coder", Kind: domain.AgentOwned, CreatedAt: now}, "")
	require.NoError(t, err)
	cfg := domain.TemplateConfig{Alias: "default", Transport: domain.TransportCodexAppServer, AuthMode: auth,
		Sandbox: domain.SandboxConfig{Enabled: true}}.Normalized()
	tmpl, err := st.CreateTemplate(ctx, domain.Template{ID: uuid.New(), AgentID: a.ID, Config: cfg, CreatedAt: now})
	require.NoError(t, err)
	room, err := st.CreateRoom(ctx, domain.Room{ID: uuid.New(), Name: "lab", CreatedAt: now})
	require.NoError(t, err)
	m, err := st.AddAgentToRoom(ctx, room.ID, a.ID, now)
	require.NoError(t, err)
	session := m.Session.RuntimeSessionID
	alloc, err := st.AllocateHost(ctx, store.AllocateRequest{AgentID: a.ID, TemplateID: tmpl.ID, RuntimeSession: session,
		Placement: domain.PlacementDedicated, Node: "n1", Sandboxed: true, Compatibility: domain.CompatibilityFingerprint(cfg, ""),
		SandboxName: func(h uuid.UUID) string { return activities.SandboxName(a.ID, h) }, At: now})
	require.NoError(t, err)
	env := fakesbx.Env(t, "", sbxEnv...)
	acts := &activities.Sandbox{Sbx: fakesbx.Binary(t), Env: env, Store: st, Layout: domain.Layout{Root: t.TempDir()}}
	var suite testsuite.WorkflowTestSuite
	aenv := suite.NewTestActivityEnvironment()
	aenv.RegisterActivity(acts)
	return &sandboxWorld{st: st, acts: acts, env: aenv, host: alloc.Host, session: session}
}

// status is the status of the world's one sandbox.
func (w *sandboxWorld) status(t *testing.T) domain.SandboxStatus {
	t.Helper()
	d, err := w.acts.Driver(context.Background())
	require.NoError(t, err)
	list, err := d.List(context.Background())
	require.NoError(t, err)
	require.Len(t, list, 1)
	return list[0].Status
}

// stopped runs a sandbox-stopping activity and returns the names it stopped.
func (w *sandboxWorld) stopped(t *testing.T, activity, in any) []string {
	t.Helper()
	v, err := w.env.ExecuteActivity(activity, in)
	require.NoError(t, err)
	var out []string
	require.NoError(t, v.Get(&out))
	return out
}

func (w *sandboxWorld) ensure() (activities.EnsureSandboxResult, error) {
	v, err := w.env.ExecuteActivity(w.acts.EnsureSandbox, activities.EnsureSandboxInput{Host: w.host.ID, Session: w.session})
	if err != nil {
		return activities.EnsureSandboxResult{}, err
	}
	var out activities.EnsureSandboxResult
	return out, v.Get(&out)
}

func TestAnAPIKeyRuntimeNeedsItsGlobalServiceSecretBeforeASandboxIsMade(t *testing.T) {
	w := newSandboxWorld(t, domain.AuthAPIKey)
	_, err := w.ensure()
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, string(domain.ErrTypeCredentialMissing), app.Type())
	require.Contains(t, app.Error(), "sbx secret set -g openai")

	ok := newSandboxWorld(t, domain.AuthAPIKey, "FAKESBX_STORED_SERVICES=global:openai")
	res, err := ok.ensure()
	require.NoError(t, err)
	require.True(t, res.Created)
	require.Equal(t, ok.host.SandboxName, res.Name)
}

func TestEnsureSandboxProvisionsTheManagedLayoutFirstAndPreservesACorruptManifest(t *testing.T) {
	w := newSandboxWorld(t, domain.AuthProviderLogin)
	res, err := w.ensure()
	require.NoError(t, err)
	require.True(t, res.Created)
	root := w.acts.Layout.RuntimeHostRoot(w.host.ID)
	for _, dir := range []string{"workspace-root/sessions/" + w.session.String(), "provider-state/codex", "recovery"} {
		st, err := os.Stat(filepath.Join(root, dir))
		require.NoError(t, err, dir)
		require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), dir)
	}
	again, err := w.ensure()
	require.NoError(t, err)
	require.False(t, again.Created, "a retry reuses the verified sandbox")

	// A manifest that names another owner is evidence: kept byte for byte, never used.
	corrupt := []byte(`{"version":1,"runtime_host":"` + uuid.NewString() + `"}`)
	require.NoError(t, os.WriteFile(filepath.Join(root, "manifest.json"), corrupt, 0o600))
	_, err = w.ensure()
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, string(domain.ErrTypeWorkspaceCorrupt), app.Type())
	kept, _ := os.ReadFile(filepath.Join(root, "manifest.json"))
	require.Equal(t, corrupt, kept)
	var state string
	require.NoError(t, w.st.DB().QueryRow(`SELECT state FROM managed_workspaces WHERE id = ?`, w.session.String()).Scan(&state))
	require.Equal(t, string(domain.WorkspaceNeedsReconciliation), state)
}

// A crash between a published complete.json and its record: the retried activity finds the
// generation already published under its id and inserts the identical record.
func TestARetriedCaptureRepairsTheManifestToRecordCrashWindow(t *testing.T) {
	ctx := context.Background()
	w := newSandboxWorld(t, domain.AuthProviderLogin)
	_, err := w.ensure()
	require.NoError(t, err)
	paths, err := workspace.ManagedPaths(w.acts.Layout, w.host.ID)
	require.NoError(t, err)
	state, err := paths.ProviderState(domain.ProviderCodex)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(state, "rollout.jsonl"), []byte("thread"), 0o600))

	// The first attempt published the generation, then died before the record.
	id := uuid.New()
	hs, err := w.st.GetHostSession(ctx, w.session)
	require.NoError(t, err)
	_, err = checkpoint.Store{Root: paths.Checkpoints()}.Capture(ctx, checkpoint.CaptureRequest{Meta: checkpoint.Meta{ID: id,
		Host: w.host.ID, Reason: domain.CheckpointBeforeStop, Provider: domain.ProviderCodex,
		Sessions: []checkpoint.Session{{RuntimeSession: hs.RuntimeSessionID, ProviderSessionID: hs.ProviderSessionID}}},
		Source: state, At: time.Now()})
	require.NoError(t, err)
	_, err = w.st.GetCheckpoint(ctx, id)
	require.ErrorIs(t, err, store.ErrNotFound)

	acts := &activities.Checkpoints{Store: w.st, Layout: w.acts.Layout}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	v, err := env.ExecuteActivity(acts.CaptureCheckpoint, activities.CaptureCheckpointInput{Host: w.host.ID, ID: id,
		Reason: domain.CheckpointBeforeStop})
	require.NoError(t, err)
	var out contract.CaptureCheckpointResult
	require.NoError(t, v.Get(&out))
	rec, err := w.st.GetCheckpoint(ctx, id)
	require.NoError(t, err)
	require.Equal(t, int64(len("thread")), rec.PayloadBytes)
	require.Equal(t, 1, out.Files)
}

// TestAFencedNodeStopsOnlyTheSandboxesWhoseRootsAreInItsHostStore: a node that lost its store
// stops (ownership-proved, without reading the store) the running sandboxes whose workspace
// is in its host store — another node may soon serve those hosts — and leaves the others.
func TestAFencedNodeStopsOnlyTheSandboxesWhoseRootsAreInItsHostStore(t *testing.T) {
	status := func(w *sandboxWorld) domain.SandboxStatus { return w.status(t) }
	stop := func(w *sandboxWorld) []string {
		return w.stopped(t, w.acts.StopSandboxesInStore, activities.StopSandboxesInStoreInput{})
	}
	// In the store: stopped.
	in := newSandboxWorld(t, domain.AuthProviderLogin)
	in.acts.Layout.Hosts = t.TempDir()
	_, err := in.ensure()
	require.NoError(t, err)
	require.Equal(t, domain.SandboxRunning, status(in))
	require.Equal(t, []string{in.host.SandboxName}, stop(in))
	require.Equal(t, domain.SandboxStopped, status(in))
	require.Empty(t, stop(in), "a stopped sandbox is stopped again")

	// Its root in the node's own data directory (made before the store was configured):
	// left running.
	out := newSandboxWorld(t, domain.AuthProviderLogin)
	_, err = out.ensure()
	require.NoError(t, err)
	out.acts.Layout.Hosts = t.TempDir()
	require.Empty(t, stop(out))
	require.Equal(t, domain.SandboxRunning, status(out))
}

// TestAStartingNodeStopsItsSandboxesWhoseHostsMovedAway: a node starting again stops
// (ownership-proved) its running sandboxes whose host records now name another node — they
// moved while it was fenced — and leaves those of hosts still its own.
func TestAStartingNodeStopsItsSandboxesWhoseHostsMovedAway(t *testing.T) {
	w := newSandboxWorld(t, domain.AuthProviderLogin)
	_, err := w.ensure()
	require.NoError(t, err)
	sweep := func(node string) []string {
		return w.stopped(t, w.acts.StopMovedSandboxes, activities.StopMovedSandboxesInput{Node: node})
	}
	status := func() domain.SandboxStatus { return w.status(t) }
	require.Empty(t, sweep(w.host.Node), "the node of the host stopped its sandbox")
	require.Equal(t, domain.SandboxRunning, status())
	// On another node (the host's record names n1), the same sandbox is one that moved away.
	require.Equal(t, []string{w.host.SandboxName}, sweep("n0"))
	require.Equal(t, domain.SandboxStopped, status())
}

// On a node without sbx the inventory fails as sandbox_unavailable, saying so for people (the
// API answers it as a precondition: TestASandboxInventoryOfANodeWithoutSbxSaysWhy).
func TestASandboxInventoryWithoutSbxIsSandboxUnavailable(t *testing.T) {
	t.Parallel()
	acts := &activities.Sandbox{PATH: t.TempDir(), Store: teststore.SQLite(t), Layout: domain.Layout{Root: t.TempDir()}}
	_, err := acts.SandboxInventory(context.Background(), activities.SandboxInventoryInput{})
	_, msg, _ := contract.Classify(err)
	if !contract.Is(err, domain.ErrTypeSandboxUnavailable) || msg != "no usable sbx on this node: "+sandbox.LocateProblem("", exec.ErrNotFound) {
		t.Fatalf("inventory without sbx: %v (%q)", err, msg)
	}
}
