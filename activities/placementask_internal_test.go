package activities

import (
	"testing"

	"github.com/jam-dev/jam/internal/domain"
)

// TestOnlyRoomsWhoseFilesAreAllInTheirHostRootMayMove: a session may run on a node sharing its
// host store only when its workspace and provider state are all in its host root.
func TestOnlyRoomsWhoseFilesAreAllInTheirHostRootMayMove(t *testing.T) {
	sandboxed := func(src domain.WorkspaceSource) domain.TemplateConfig {
		return domain.TemplateConfig{Transport: domain.TransportCursorACP,
			Sandbox: domain.SandboxConfig{Enabled: true, WorkspaceSource: src, HostPath: "/src"}}
	}
	cases := []struct {
		name string
		c    domain.TemplateConfig
		want bool
	}{
		{"host-native Claude Code, managed workspace", domain.TemplateConfig{Transport: domain.TransportClaudeCodeCLI}, true},
		{"host-native Claude Code, direct host workspace", domain.TemplateConfig{Transport: domain.TransportClaudeCodeCLI,
			Sandbox: domain.SandboxConfig{WorkspaceSource: domain.WorkspaceDirectHost, HostPath: "/src"}}, false},
		{"host-native Codex (state in the operator's home)", domain.TemplateConfig{Transport: domain.TransportCodexAppServer}, false},
		{"sandboxed, managed workspace", sandboxed(""), true},
		{"sandboxed, managed workspace named", sandboxed(domain.WorkspaceManaged), true},
		{"sandboxed, direct host workspace", sandboxed(domain.WorkspaceDirectHost), false},
		{"sandboxed, private clone inside the microVM", sandboxed(domain.WorkspacePrivateHostClone), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := placementAsk(c.c, "n1").Movable; got != c.want {
				t.Fatalf("movable %v, want %v", got, c.want)
			}
		})
	}
}
