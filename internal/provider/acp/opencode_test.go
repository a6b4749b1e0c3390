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
)

// requireRealAgents makes a missing real agent CLI a failure (CI installs them) instead of a skip.
func requireRealAgents() bool { return os.Getenv("JAM_REQUIRE_REAL_AGENTS") == "1" }

// TestOpenCodeHandshake drives the real `opencode acp` (npm opencode-ai) through the same
// adapter: initialize v1 and session/new, offline, with its home in a temporary directory.
func TestOpenCodeHandshake(t *testing.T) {
	row, ok := domain.LookupTransport(domain.TransportOpenCode)
	require.True(t, ok)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	exe, err := provider.ResolveExecutable(ctx, provider.ExecutableRequest{Command: row.Command, PATH: os.Getenv("PATH")})
	if err != nil {
		if requireRealAgents() {
			t.Fatalf("opencode is required (JAM_REQUIRE_REAL_AGENTS=1): %v", err)
		}
		t.Skipf("opencode is not installed: %v", err)
	}
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
