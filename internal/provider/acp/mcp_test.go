package acp

import (
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/jam-dev/jam/internal/provider"
)

func TestJamsToolsAreOfferedAsHTTPOrThroughTheBridge(t *testing.T) {
	t.Parallel()
	e := &provider.MCPEndpoint{Name: "jam", URL: "http://127.0.0.1:1/mcp", Token: "tok",
		BridgeCommand: "/usr/bin/jam", BridgeArgs: []string{"mcp", "--url", "http://127.0.0.1:1/mcp"}, BridgeEnv: []string{"JAM_MCP_TOKEN=tok"}}
	http := mcpServers(e, sdk.McpCapabilities{Http: true})
	if len(http) != 1 || http[0].Http == nil || http[0].Http.Url != e.URL || len(http[0].Http.Headers) != 1 ||
		http[0].Http.Headers[0].Value != "Bearer tok" {
		t.Fatalf("an HTTP-capable agent got %+v", http)
	}
	stdio := mcpServers(e, sdk.McpCapabilities{})
	if len(stdio) != 1 || stdio[0].Stdio == nil || stdio[0].Stdio.Command != "/usr/bin/jam" || len(stdio[0].Stdio.Env) != 1 {
		t.Fatalf("a stdio-only agent got %+v", stdio)
	}
	for _, a := range stdio[0].Stdio.Args {
		if a == "tok" {
			t.Fatal("the token is on the bridge's command line")
		}
	}
	// A sandboxed endpoint has no bridge (no jam in the guest): a stdio-only agent gets none.
	guest := &provider.MCPEndpoint{Name: "jam", URL: "http://host.docker.internal:1/mcp", Token: "tok"}
	if got := mcpServers(guest, sdk.McpCapabilities{}); len(got) != 0 {
		t.Fatalf("a stdio-only sandboxed agent got %+v", got)
	}
	if got := mcpServers(nil, sdk.McpCapabilities{Http: true}); got == nil || len(got) != 0 {
		t.Fatalf("no endpoint: %+v (must be an empty list, not null)", got)
	}
}
