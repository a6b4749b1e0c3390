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
)

// Issue 17: a host-native agent read the operator token, the database URL and the
// server's cloud and model credentials back from its environment. Through jam dev and the
// public API: an owned agent sees its base environment and nothing of Jam's or the
// server's secrets; a credential reaches it only when its template names it; a template
// cannot name a custody key or Jam's own configuration.
func TestHostNativeAgentsSeeNoSecretTheirTemplateDidNotName(t *testing.T) {
	t.Parallel()
	const token = "jam-test-operator-token"
	home := filepath.Join(t.TempDir(), "jam-home")
	store := "sqlite:" + filepath.Join(t.TempDir(), "jam.db")
	p := startJam(t, append([]string{"JAM_HOME=" + home}, ownedEnv(t, t.TempDir(),
		"JAM_API_TOKEN="+token, "JAM_DATABASE_URL="+store, "AWS_SECRET_ACCESS_KEY=aws-secret",
		"OPENAI_API_KEY=openai-secret", "GITHUB_TOKEN=github-secret", "LANG=C.UTF-8")...),
		"dev", "--listen", "127.0.0.1:0", "--temporal-listen", "127.0.0.1:0", "--ui-listen", "127.0.0.1:0", "--node", devNode)
	url := p.banner(60*time.Second, `Jam API:\s+(\S+)`)[0]
	waitHTTP(t, url+"/healthz", http.StatusOK, 30*time.Second)
	c, ctx := apiClient(url, token), context.Background()

	secrets := []string{"JAM_API_TOKEN", "JAM_DATABASE_URL", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN",
		"JAM_HOME", "JAM_JAM_TESTAGENT_BIN"}
	ask := func(names ...string) string {
		var b strings.Builder
		for _, n := range names {
			b.WriteString("[[env " + n + "]] ")
		}
		return b.String() + "what do you see?"
	}
	var plain api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "plain", Kind: domain.AgentOwned}, &plain))
	room, _ := roomWith(t, c, "env", plain.ID)
	reply := awaitReply(t, c, postText(t, c, room.ID, ask(append(secrets, "LANG", "HOME")...)), 60*time.Second).Text
	for _, name := range secrets {
		if !strings.Contains(reply, "env "+name+"=(unset)") {
			t.Errorf("a host-native agent sees %s:\n%s", name, reply)
		}
	}
	if !strings.Contains(reply, "env LANG=C.UTF-8") || strings.Contains(reply, "env HOME=(unset)") {
		t.Errorf("the base environment did not reach the agent:\n%s", reply)
	}

	// A template that names a provider credential gets exactly that one.
	tmpl := domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP, EnvAllowlist: []string{"OPENAI_API_KEY"}}
	var named api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "named", Kind: domain.AgentOwned, Template: &tmpl}, &named))
	room2, _ := roomWith(t, c, "env-named", named.ID)
	reply = awaitReply(t, c, postText(t, c, room2.ID, ask("OPENAI_API_KEY", "GITHUB_TOKEN", "JAM_API_TOKEN")), 60*time.Second).Text
	if !strings.Contains(reply, "env OPENAI_API_KEY=openai-secret") || !strings.Contains(reply, "env GITHUB_TOKEN=(unset)") ||
		!strings.Contains(reply, "env JAM_API_TOKEN=(unset)") {
		t.Errorf("an allowlisted credential:\n%s", reply)
	}

	// Custody keys and Jam's own configuration are refused at save.
	for _, name := range []string{"JAM_API_TOKEN", "JAM_DATABASE_URL"} {
		bad := domain.TemplateConfig{Alias: "leaky", Transport: domain.TransportACP, EnvAllowlist: []string{name}}
		err := c.Do(ctx, http.MethodPost, "/v1/agents/"+named.ID.String()+"/templates", bad, nil)
		if !isStatus(err, http.StatusBadRequest) {
			t.Errorf("a template allowlisting %s: %v, want 400", name, err)
		}
	}
}
