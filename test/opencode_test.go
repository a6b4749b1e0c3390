package test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// Issue 17: a real sandboxed OpenCode answered once and never again — it kept its database
// in the guest's ~/.local/share, outside the provider-state mount, so the park captured
// nothing and the next wake failed closed. Through jam dev, the fake sbx and the real
// `opencode acp` talking to the scripted model server: answer, reap and park (a checkpoint
// holding the session, with OpenCode's version), wake on the same provider session with
// the earlier turn in the model's input, twice.
func TestASandboxedOpenCodeResumesItsSessionAcrossParks(t *testing.T) {
	t.Parallel()
	exe := realagent.Require(t, "opencode")
	model, err := stubmodel.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close() })
	config := `{"$schema":"https://opencode.ai/config.json","model":"stub/stub-model","autoupdate":false,` +
		`"provider":{"stub":{"npm":"@ai-sdk/openai-compatible","name":"stub","options":{"baseURL":"` + model.URL +
		`/v1","apiKey":"x"},"models":{"stub-model":{"name":"stub"}}}}}`
	state := t.TempDir()
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), ownedEnv(t, t.TempDir(), "JAM_OWNED_RUNTIME_IDLE_SECS=3",
		"JAM_SBX="+fakesbx.Binary(t), "FAKESBX_STATE="+state, "FAKESBX_LOG="+filepath.Join(t.TempDir(), "sbx.log"),
		"OPENCODE_CONFIG_CONTENT="+config, "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1"))
	c, ctx := d.client, context.Background()

	placement := domain.PlacementDedicated
	tmpl := domain.TemplateConfig{Alias: "default", Transport: domain.TransportOpenCode, Placement: &placement,
		EnvAllowlist: []string{"OPENCODE_CONFIG_CONTENT", "OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_LSP_DOWNLOAD"},
		Sandbox:      domain.SandboxConfig{Enabled: true}}
	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "opencode", Kind: domain.AgentOwned, Template: &tmpl}, &agent))
	room, session := roomWith(t, c, "lab", agent.ID)
	host := "/v1/hosts/" + session.String() // a Dedicated host's id is its session's

	var bound string
	for i, question := range []string{"the first question", "the second question", "the third question"} {
		before := len(model.Requests())
		r := awaitReply(t, c, postText(t, c, room.ID, question), 3*time.Minute)
		if !strings.HasPrefix(r.Text, "stub: ") {
			t.Fatalf("turn %d: the reply %q is not the model's", i, r.Text)
		}
		s := getSession(t, c, session)
		if i == 0 {
			bound = s.ProviderSessionID
		}
		if s.ProviderSessionID == "" || s.ProviderSessionID != bound {
			t.Fatalf("turn %d runs on provider session %q, bound %q", i, s.ProviderSessionID, bound)
		}
		if i > 0 {
			// Woken from the park on the same thread: the model sees the turns before.
			var resumed bool
			for _, req := range model.Requests()[before:] {
				resumed = resumed || (strings.Contains(req.AllText(), "the first question") && strings.Contains(req.LastUser(), question))
			}
			if !resumed {
				t.Fatalf("turn %d: no model request carried the earlier turns", i)
			}
		}
		// Reaped when idle; the host parks and checkpoints OpenCode's state.
		awaitPresence(t, c, session, domain.PresenceDormant, 60*time.Second)
		var cps api.CheckpointList
		wait.Eventually(t, 60*time.Second, func() bool {
			must(t, c.Do(ctx, http.MethodGet, host+"/checkpoints", nil, &cps))
			return len(cps.Items) >= i+1
		}, "checkpoint %d", i+1)
		newest := cps.Items[0]
		if len(newest.Sessions) != 1 || newest.Sessions[0].ProviderSessionID != bound || newest.PayloadBytes == 0 {
			t.Fatalf("park %d checkpoint %+v", i, newest)
		}
		if exe.Version != "" && newest.ProviderVersion != exe.Version {
			t.Fatalf("park %d checkpoint records provider version %q, opencode is %s", i, newest.ProviderVersion, exe.Version)
		}
		var cont api.ContinuityBody
		must(t, c.Do(ctx, http.MethodGet, host+"/continuity", nil, &cont))
		if cont.Status != domain.ContinuityHealthy {
			t.Fatalf("park %d continuity %+v", i, cont.ContinuityReportBody)
		}
	}
}
