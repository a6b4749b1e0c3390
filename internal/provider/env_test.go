package provider

import (
	"errors"
	"slices"
	"testing"

	"github.com/jam-dev/jam/internal/domain"
)

// The worker of issue 17: every one of these reached a host-native agent through
// os.Environ().
var workerEnv = []string{
	"PATH=/usr/bin:/bin", "HOME=/home/op", "LANG=C.UTF-8", "USER=op", "TERM=xterm",
	"JAM_API_TOKEN=operator-token", "JAM_DATABASE_URL=postgres://jam:pw@db/jam", "JAM_HOME=/var/lib/jam",
	"JAM_LISTEN=127.0.0.1:7780", "JAM_TEMPORAL_ADDRESS=127.0.0.1:7233", "JAM_JAM_TESTAGENT_BIN=/opt/testagent",
	"AWS_SECRET_ACCESS_KEY=aws", "OPENAI_API_KEY=sk-openai", "GITHUB_TOKEN=ghp", "SSH_AUTH_SOCK=/tmp/agent.sock",
	"CODEX_HOME=/home/op/.codex-work", "XDG_CONFIG_HOME=/home/op/.config", "JAM_TESTAGENT_STATE_DIR=/tmp/ta",
}

func TestHostNativeEnvPassesOnlyTheBaseTheRowAndTheAllowlist(t *testing.T) {
	t.Parallel()
	codex, _ := domain.LookupTransport(domain.TransportCodexAppServer)
	opencode, _ := domain.LookupTransport(domain.TransportOpenCode)
	acp, _ := domain.LookupTransport(domain.TransportACP)
	base := []string{"PATH=/usr/bin:/bin", "HOME=/home/op", "USER=op", "LANG=C.UTF-8", "TERM=xterm"}
	for _, tc := range []struct {
		name      string
		row       domain.TransportSpec
		allowlist []string
		extra     []string
		want      []string
	}{
		{name: "codex finds the operator's CODEX_HOME", row: codex,
			want: append(slices.Clone(base), "CODEX_HOME=/home/op/.codex-work")},
		{name: "opencode finds the operator's XDG config", row: opencode,
			want: append(slices.Clone(base), "XDG_CONFIG_HOME=/home/op/.config")},
		{name: "the test agent's state directory is the ACP row's, handed deliberately", row: acp,
			want: append(slices.Clone(base), "JAM_TESTAGENT_STATE_DIR=/tmp/ta", "XDG_CONFIG_HOME=/home/op/.config")},
		{name: "a provider credential only when the template names it", row: codex, allowlist: []string{"OPENAI_API_KEY", "NOT_SET"},
			want: append(slices.Clone(base), "CODEX_HOME=/home/op/.codex-work", "OPENAI_API_KEY=sk-openai")},
		{name: "what Jam hands the provider wins", row: codex, extra: []string{"CODEX_HOME=/state", "JAM_MCP_URL=http://x"},
			want: append(slices.Clone(base), "CODEX_HOME=/state", "JAM_MCP_URL=http://x")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := HostNativeEnv(workerEnv, tc.row, tc.allowlist, tc.extra...)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			slices.Sort(tc.want)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("env\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestHostNativeEnvRefusesCustodyKeysAndJamConfiguration(t *testing.T) {
	t.Parallel()
	codex, _ := domain.LookupTransport(domain.TransportCodexAppServer)
	for _, name := range []string{"JAM_API_TOKEN", "JAM_AGENT_KEY_2", "JAM_DATABASE_URL", "jam_home", "bad name"} {
		_, err := HostNativeEnv(workerEnv, codex, []string{name})
		if !errors.Is(err, ErrEnvRefused) {
			t.Errorf("allowlisting %q: err %v, want ErrEnvRefused", name, err)
		}
	}
}
