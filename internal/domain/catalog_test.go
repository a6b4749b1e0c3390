package domain

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCatalogPublishesTheReferenceSandboxCells(t *testing.T) {
	t.Parallel()
	for _, spec := range TransportCatalog() {
		var shared []SandboxCell
		for _, c := range spec.Cells {
			if c.Placement == PlacementShared {
				shared = append(shared, c)
			}
		}
		switch spec.Transport {
		case TransportCodexAppServer, TransportCopilotSDK, TransportClaudeCodeCLI, TransportCursorACP:
			if len(spec.Cells) != 7 || len(shared) != 1 ||
				shared[0] != (SandboxCell{ConfigJamManaged, WorkspaceManaged, PlacementShared}) {
				t.Errorf("%s: %d cells, shared %v", spec.Transport, len(spec.Cells), shared)
			}
		case TransportOpenCode:
			if len(spec.Cells) != 3 || len(shared) != 0 {
				t.Errorf("%s: %v", spec.Transport, spec.Cells)
			}
			for _, c := range spec.Cells {
				if c.Configuration != ConfigJamManaged {
					t.Errorf("%s: cell %v is not Jam-managed", spec.Transport, c)
				}
			}
		default:
			if len(spec.Cells) != 0 {
				t.Errorf("%s publishes cells %v", spec.Transport, spec.Cells)
			}
		}
		seen := map[SandboxCell]bool{}
		for _, c := range spec.Cells {
			if seen[c] {
				t.Errorf("%s: duplicate cell %v", spec.Transport, c)
			}
			seen[c] = true
		}
	}
	for _, tr := range Transports.Values() {
		if _, ok := LookupTransport(tr); !ok {
			t.Errorf("transport %s has no catalog row", tr)
		}
	}
}

func TestAbsentPlacementResolvesToDedicated(t *testing.T) {
	t.Parallel()
	shared := PlacementShared
	empty := Placement("")
	if ResolvePlacement(nil) != PlacementDedicated || ResolvePlacement(&empty) != PlacementDedicated ||
		ResolvePlacement(&shared) != PlacementShared {
		t.Fatal("placement resolution")
	}
}

func decodeTemplate(t *testing.T, body string) (TemplateConfig, error) {
	t.Helper()
	var c TemplateConfig
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func TestTemplateValidationFollowsTheCatalog(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		body  string
		field string // "" means valid
	}{
		{"host-native acp", `{"alias":"default","transport":"acp","command":"/usr/local/bin/jam-testagent"}`, ""},
		{"shared codex", `{"alias":"default","transport":"codex-app-server","sandbox":{"enabled":true},"placement":"shared_agent_host"}`, ""},
		{"direct host claude", `{"alias":"d","transport":"claude-code-cli","sandbox":{"enabled":true,"workspace_source":"direct_host","host_path":"/src/app"}}`, ""},
		{"docker env copilot", `{"alias":"d","transport":"copilot-sdk","sandbox":{"enabled":true,"configuration_source":"docker_environment","files":["/etc/jam/dev.sbxenv"]}}`, ""},
		{"unknown transport", `{"alias":"d","transport":"gemini"}`, "transport"},
		{"legacy pty", `{"alias":"d","transport":"pty"}`, "transport"},
		{"attach inbox", `{"alias":"d","transport":"attach-inbox"}`, "transport"},
		{"missing transport", `{"alias":"d"}`, "transport"},
		{"bad alias", `{"alias":"Default Room","transport":"acp"}`, "alias"},
		{"relative command", `{"alias":"d","transport":"acp","command":"bin/agent"}`, "command"},
		{"shared with direct host", `{"alias":"d","transport":"codex-app-server","placement":"shared_agent_host","sandbox":{"enabled":true,"workspace_source":"direct_host","host_path":"/src"}}`, "sandbox"},
		{"opencode shared", `{"alias":"d","transport":"opencode","placement":"shared_agent_host","sandbox":{"enabled":true}}`, "sandbox"},
		{"opencode docker env", `{"alias":"d","transport":"opencode","sandbox":{"enabled":true,"configuration_source":"docker_environment","files":["/x.sbxenv"]}}`, "sandbox"},
		{"acp sandboxed", `{"alias":"d","transport":"acp","sandbox":{"enabled":true}}`, "sandbox.enabled"},
		{"shared host-native", `{"alias":"d","transport":"codex-app-server","placement":"shared_agent_host"}`, "placement"},
		{"host path without clone", `{"alias":"d","transport":"codex-app-server","sandbox":{"enabled":true,"host_path":"/src"}}`, "sandbox.host_path"},
		{"clone without path", `{"alias":"d","transport":"codex-app-server","sandbox":{"enabled":true,"workspace_source":"private_host_clone"}}`, "sandbox.host_path"},
		{"docker env without files", `{"alias":"d","transport":"codex-app-server","sandbox":{"enabled":true,"configuration_source":"docker_environment"}}`, "sandbox.files"},
		{"sandbox fields without sandbox", `{"alias":"d","transport":"codex-app-server","sandbox":{"workspace_source":"managed"}}`, "sandbox"},
		{"custody key", `{"alias":"d","transport":"acp","env_allowlist":["JAM_AGENT_KEY_2"]}`, "env_allowlist[0]"},
		{"secret in a sandbox", `{"alias":"d","transport":"codex-app-server","sandbox":{"enabled":true},"env_allowlist":["OPENAI_API_KEY"]}`, "env_allowlist[0]"},
		{"bad env name", `{"alias":"d","transport":"acp","env_allowlist":["A-B"]}`, "env_allowlist[0]"},
		{"unknown setting", `{"alias":"d","transport":"acp","settings":{"turbo":"yes"}}`, "settings.turbo"},
		{"wrong auth", `{"alias":"d","transport":"opencode","auth_mode":"api_key"}`, "auth_mode"},
		{"idle out of range", `{"alias":"d","transport":"acp","idle_secs":0}`, "idle_secs"},
		{"unknown placement", `{"alias":"d","transport":"acp","placement":"everywhere"}`, "placement"},
		{"claude extra args", `{"alias":"d","transport":"claude-code-cli","args":["--max-turns","8"],"settings":{"permission_mode":"acceptEdits"}}`, ""},
		{"claude resume in args", `{"alias":"d","transport":"claude-code-cli","args":["--resume=abc"]}`, "args[0]"},
		{"claude mcp config in args", `{"alias":"d","transport":"claude-code-cli","args":["--max-turns","8","--mcp-config","/tmp/x.json"]}`, "args[2]"},
		{"claude unknown permission mode", `{"alias":"d","transport":"claude-code-cli","settings":{"permission_mode":"yolo"}}`, "settings.permission_mode"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeTemplate(t, c.body)
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			vs, ok := AsValidations(err)
			if !ok {
				t.Fatalf("err = %v, want validations", err)
			}
			for _, v := range vs {
				if v.Field == c.field && v.Detail != "" {
					return
				}
			}
			t.Fatalf("validations %v lack field %s", vs, c.field)
		})
	}
}

func TestHostNativeEnvAllowlistMayNameSecrets(t *testing.T) {
	t.Parallel()
	if _, err := decodeTemplate(t, `{"alias":"d","transport":"codex-app-server","env_allowlist":["OPENAI_API_KEY"]}`); err != nil {
		t.Fatalf("a host-native runtime may inherit its provider key: %v", err)
	}
}

func TestNormalizedTemplateWritesDefaultsOut(t *testing.T) {
	t.Parallel()
	c, err := decodeTemplate(t, `{"alias":"d","transport":"claude-code-cli","sandbox":{"enabled":true}}`)
	if err != nil {
		t.Fatal(err)
	}
	n := c.Normalized()
	if *n.Placement != PlacementDedicated || n.NetworkProfile != NetworkDeveloper || n.AuthMode != AuthProviderLogin ||
		n.IdlePolicy != IdleKeepAlive || n.Sandbox.WorkspaceSource != WorkspaceManaged ||
		n.Sandbox.ConfigurationSource != ConfigJamManaged || n.Args == nil {
		t.Fatalf("normalized %+v", n)
	}
	if err := n.Validate(); err != nil {
		t.Fatalf("normalized template invalid: %v", err)
	}
}

func TestCustodyKeysAreRecognised(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"JAM_AGENT_KEY", "jam_agent_key_2", "JAM_API_TOKEN"} {
		if !IsCustodyEnvKey(k) {
			t.Errorf("%s not recognised", k)
		}
	}
	if IsCustodyEnvKey("JAM_AGENT_KEYRING") || IsCustodyEnvKey("HOME") {
		t.Error("false positive")
	}
	var ve *ValidationError
	_, err := decodeTemplate(t, `{"alias":"d","transport":"Codex"}`)
	if !errors.As(err, &ve) || !strings.Contains(ve.Detail, "codex-app-server") {
		t.Fatalf("unknown transport error %v", err)
	}
}

// Issue 17: OpenCode kept its database outside the provider-state mount, so a park captured
// nothing. Every transport Jam runs names where its provider keeps its state, and a
// readiness bound for its start handshake.
func TestEveryOwnedTransportNamesItsStateAndReadiness(t *testing.T) {
	t.Parallel()
	for _, row := range TransportCatalog() {
		if !row.Owned || row.Legacy {
			continue
		}
		if len(row.State) == 0 {
			t.Errorf("%s names no state variable", row.Transport)
		}
		for _, v := range row.State {
			if !IsEnvName(v.Name) || IsCustodyEnvKey(v.Name) || strings.Contains(v.Sub, "..") || strings.HasPrefix(v.Sub, "/") {
				t.Errorf("%s: state variable %+v", row.Transport, v)
			}
		}
		if row.ReadyTimeout <= 0 {
			t.Errorf("%s names no readiness bound", row.Transport)
		}
	}
}

// An unknown transport is refused with the transports a template may choose, and only those:
// attach-inbox (attached agents) and pty (legacy) are refused when named, so listing them
// as valid would send people to a second refusal.
func TestAnUnknownTransportListsOnlyTheTransportsATemplateMayUse(t *testing.T) {
	t.Parallel()
	var body struct {
		Transport Transport `json:"transport"`
	}
	decodeErr := json.Unmarshal([]byte(`{"transport":"gemini"}`), &body)
	validateErr := TemplateConfig{Alias: "d", Transport: "gemini"}.Validate()
	for _, err := range []error{decodeErr, validateErr} {
		vs, ok := AsValidations(err)
		if !ok || len(vs) == 0 || vs[0].Field != "transport" {
			t.Fatalf("unknown transport: %v", err)
		}
		for _, tr := range TemplateTransports() {
			if !strings.Contains(vs[0].Detail, string(tr)) {
				t.Errorf("%q does not list %s", vs[0].Detail, tr)
			}
		}
		for _, refused := range []Transport{TransportAttachInbox, TransportPTY} {
			if strings.Contains(vs[0].Detail, string(refused)) {
				t.Errorf("%q lists %s, which a template cannot use", vs[0].Detail, refused)
			}
		}
	}
	// Records that name them still load.
	for _, tr := range []Transport{TransportAttachInbox, TransportPTY} {
		if err := json.Unmarshal([]byte(`{"transport":"`+string(tr)+`"}`), &body); err != nil || body.Transport != tr {
			t.Errorf("%s does not load: %v", tr, err)
		}
	}
}
