package acp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/provider/acp"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
)

// TestOpenCodeHandshake drives the real `opencode acp` (npm opencode-ai) through the same
// adapter: initialize v1 and session/new, offline, with its home in a temporary directory.
func TestOpenCodeHandshake(t *testing.T) {
	t.Parallel()
	row, ok := domain.LookupTransport(domain.TransportOpenCode)
	require.True(t, ok)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	exe := realagent.Require(t, row.Command)
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "XDG_DATA_HOME=" + filepath.Join(home, "data"),
		"XDG_CACHE_HOME=" + filepath.Join(home, "cache"), "XDG_STATE_HOME=" + filepath.Join(home, "state"),
		"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1"}
	rec := &recorder{}
	rt, err := acp.New(provider.Spec{RuntimeSession: uuid.New(), Generation: 1, Transport: domain.TransportOpenCode,
		Executable: exe.Path, Args: row.Args, Env: env, Dir: t.TempDir(), Events: rec.sink})
	require.NoError(t, err)
	p, err := rt.Prepare(ctx)
	require.NoError(t, err, "opencode %s at %s", exe.Version, exe.Path)
	pid := p.PID
	assert.True(t, strings.HasPrefix(p.ProviderSessionID, "ses_"), p.ProviderSessionID)
	assert.Equal(t, "OpenCode", p.Identity)
	assert.Len(t, rec.find("", domain.AgentRuntimeIdentity), 1)
	require.NoError(t, rt.Teardown(context.Background(), domain.CheckpointBeforeStop))
	groupGone(t, pid)
}

// openCodeConfig points opencode at the stub model server the way an operator points it at
// their own endpoint: an OpenAI-compatible provider in OPENCODE_CONFIG_CONTENT.
func openCodeConfig(baseURL string) string {
	return `{"$schema":"https://opencode.ai/config.json","model":"stub/stub-model","autoupdate":false,` +
		`"provider":{"stub":{"npm":"@ai-sdk/openai-compatible","name":"stub","options":{"baseURL":"` + baseURL +
		`/v1","apiKey":"x"},"models":{"stub-model":{"name":"stub"}}}}}`
}

// TestOpenCodeAnswersThroughTheStubModelAndResumesItsSessionInANewProcess runs real turns
// of `opencode acp` against the scripted model server: a reply, then a new process that
// loads the same session and sends the model the earlier turn.
func TestOpenCodeAnswersThroughTheStubModelAndResumesItsSessionInANewProcess(t *testing.T) {
	t.Parallel()
	exe := realagent.Require(t, "opencode")
	model, err := stubmodel.Start(nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = model.Close() })
	row, _ := domain.LookupTransport(domain.TransportOpenCode)
	home, dir := t.TempDir(), t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "OPENCODE_CONFIG_CONTENT=" + openCodeConfig(model.URL),
		"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1"}
	spec := provider.Spec{RuntimeSession: uuid.New(), Generation: 1, Transport: domain.TransportOpenCode,
		Executable: exe.Path, Args: row.Args, Env: env, Dir: dir}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	rec := &recorder{}
	spec.Events = rec.sink
	rt, err := acp.New(spec)
	require.NoError(t, err)
	p, err := rt.Prepare(ctx)
	require.NoError(t, err, "opencode %s", exe.Version)
	res, err := rt.RunTurn(ctx, turnOf("the first question"))
	require.NoError(t, err)
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	require.NotEmpty(t, res.Plan.Settles)
	assert.Contains(t, res.Plan.Settles[len(res.Plan.Settles)-1].Text, "stub: ")
	require.NoError(t, rt.Teardown(context.Background(), domain.CheckpointBeforeStop))
	groupGone(t, p.PID)

	// A new process on the same state resumes the exact session; the model sees the first turn.
	spec.Generation, spec.ProviderSessionID = 2, p.ProviderSessionID
	rt, err = acp.New(spec)
	require.NoError(t, err)
	p2, err := rt.Prepare(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Teardown(context.Background(), domain.CheckpointBeforeStop) })
	assert.True(t, p2.Resumed)
	assert.Equal(t, p.ProviderSessionID, p2.ProviderSessionID)
	before := len(model.Requests())
	res, err = rt.RunTurn(ctx, turnOf("the second question"))
	require.NoError(t, err)
	require.Equal(t, domain.TurnComplete, res.Outcome, "%v", res.Err)
	var resumed bool
	for _, r := range model.Requests()[before:] {
		if strings.Contains(r.AllText(), "the first question") && strings.Contains(r.LastUser(), "the second question") {
			resumed = true
		}
	}
	assert.True(t, resumed, "no model request of the resumed session carried the first turn")
}
