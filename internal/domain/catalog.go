package domain

import (
	"slices"
	"strings"
	"time"
)

// Provider is the provider family a transport speaks for.
type Provider string

const (
	ProviderCodex    Provider = "codex"
	ProviderCopilot  Provider = "copilot"
	ProviderClaude   Provider = "claude"
	ProviderACP      Provider = "acp"
	ProviderOpenCode Provider = "opencode"
	ProviderCursor   Provider = "cursor"
	ProviderPull     Provider = "pull"
)

var Providers = NewEnum("provider", ProviderCodex, ProviderCopilot, ProviderClaude, ProviderACP,
	ProviderOpenCode, ProviderCursor, ProviderPull)

func (v *Provider) UnmarshalText(b []byte) error { return unmarshalEnum(Providers, b, v) }

// AuthMode is how a runtime authenticates to its model provider.
type AuthMode string

const (
	// AuthProviderLogin: the CLI's own sign-in (ChatGPT, GitHub, Claude subscription, Cursor).
	AuthProviderLogin AuthMode = "provider_login"
	// AuthAPIKey: an API key delivered as a Docker service secret or from the host environment.
	AuthAPIKey AuthMode = "api_key"
	// AuthAgentManaged: the agent configures its own providers (ACP agents, OpenCode).
	AuthAgentManaged AuthMode = "agent_managed"
)

var AuthModes = NewEnum("auth_mode", AuthProviderLogin, AuthAPIKey, AuthAgentManaged)

func (v *AuthMode) UnmarshalText(b []byte) error { return unmarshalEnum(AuthModes, b, v) }

// IdlePolicy says whether the idle reaper may stop a runtime.
type IdlePolicy string

const (
	IdleAllow     IdlePolicy = "allow"
	IdleKeepAlive IdlePolicy = "keep_alive"
)

var IdlePolicies = NewEnum("idle_policy", IdleAllow, IdleKeepAlive)

func (v *IdlePolicy) UnmarshalText(b []byte) error { return unmarshalEnum(IdlePolicies, b, v) }

// SandboxCell is one structurally supported sandbox combination of a transport. A matching
// cell proves structure only; credentials, Docker version and policy are separate gates.
type SandboxCell struct {
	Configuration ConfigurationSource
	Workspace     WorkspaceSource
	Placement     Placement
}

// TransportSpec is one row of the transport catalog.
type TransportSpec struct {
	Transport Transport
	Label     string
	// Command is the executable resolved when a template names none; Args are its defaults.
	Command string
	Args    []string
	// Provider is the provider family; ProviderPull for attached agents.
	Provider Provider
	// AuthModes are the modes a template may choose; the first is the default.
	AuthModes []AuthMode
	// Settings are the keys a template's settings map may hold.
	Settings []string
	// Owned transports are run by Jam; the others describe attached agents.
	Owned bool
	// Legacy transports load from old records but are refused everywhere else.
	Legacy bool
	// IdlePolicy is the default idle-reap policy of the adapter.
	IdlePolicy IdlePolicy
	Cells      []SandboxCell
	// SandboxAgent is the `sbx create` agent a sandboxed runtime of this transport runs in.
	SandboxAgent string
	// SecretService is the Docker service secret (`sbx secret`) an api_key runtime of this
	// transport needs in a sandbox; "" when none applies.
	SecretService string
	// State names the variables that say where the provider keeps its continuity state
	// (conversations, thread index). A sandboxed session's are pointed into the
	// provider-state mount, where checkpoints capture them; a host-native session gets the
	// operator's values passed through.
	State []StateVar
	// ConfigEnv names the variables the provider reads its configuration and login from;
	// a host-native session gets them passed through when the operator set them.
	ConfigEnv []string
	// SessionState: a host-native session too keeps its State variables in its own
	// provider-state directory rather than the operator's (Claude Code: Jam pins each
	// session's id and working directory, and its transcripts stay with the session).
	SessionState bool
	// ReservedArgs are the flags the adapter sets itself (its protocol, session and tool
	// wiring); a template's args may not give them.
	ReservedArgs []string
	// Env are NAME=VALUE pairs Jam sets for every runtime of the transport, host-native and
	// sandboxed (switches that keep a CLI quiet and its tools usable; never a secret).
	Env []string
	// ReadyTimeout bounds the provider's start handshake (spawn to a bound session).
	ReadyTimeout time.Duration
}

// StateVar is one variable that locates part of a provider's continuity state.
type StateVar struct {
	Name string
	// Sub is the directory under the provider-state mount it points at ("" the mount).
	Sub string
}

// DefaultReadyTimeout bounds a provider's start handshake when its row names no bound.
const DefaultReadyTimeout = 60 * time.Second

// xdgEnv are the XDG base directories; providers that follow them read config and keep
// data there.
var xdgEnv = []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"}

// sevenCells is the sandbox matrix of Codex, Copilot, Claude Code and Cursor: every
// configuration and workspace source on a Dedicated host, and exactly one Shared cell
// (Jam-managed, Managed workspace).
var sevenCells = []SandboxCell{
	{ConfigJamManaged, WorkspaceManaged, PlacementShared},
	{ConfigJamManaged, WorkspaceManaged, PlacementDedicated},
	{ConfigJamManaged, WorkspacePrivateHostClone, PlacementDedicated},
	{ConfigJamManaged, WorkspaceDirectHost, PlacementDedicated},
	{ConfigDockerEnvironment, WorkspaceManaged, PlacementDedicated},
	{ConfigDockerEnvironment, WorkspacePrivateHostClone, PlacementDedicated},
	{ConfigDockerEnvironment, WorkspaceDirectHost, PlacementDedicated},
}

// openCodeCells: OpenCode runs only Dedicated and only Jam-managed.
var openCodeCells = []SandboxCell{
	{ConfigJamManaged, WorkspaceManaged, PlacementDedicated},
	{ConfigJamManaged, WorkspacePrivateHostClone, PlacementDedicated},
	{ConfigJamManaged, WorkspaceDirectHost, PlacementDedicated},
}

// claudeReservedArgs are the Claude Code flags Jam's adapter owns: the stream-json protocol,
// the session it resumes or pins, permissions over stdio, Jam's tools and instructions.
var claudeReservedArgs = []string{"-p", "--print", "--input-format", "--output-format", "--verbose",
	"--replay-user-messages", "--include-partial-messages", "--resume", "-r", "--continue", "-c",
	"--session-id", "--fork-session", "--permission-prompt-tool", "--permission-mode", "--mcp-config",
	"--strict-mcp-config", "--allowedTools", "--allowed-tools", "--append-system-prompt",
	"--append-system-prompt-file", "--system-prompt", "--system-prompt-file", "--model",
	"--dangerously-skip-permissions"}

// transportCatalog is the one table of transports; nothing else switches on a transport.
var transportCatalog = []TransportSpec{
	{Transport: TransportCodexAppServer, Label: "Codex", Command: "codex", Args: []string{"app-server"},
		Provider: ProviderCodex, AuthModes: []AuthMode{AuthProviderLogin, AuthAPIKey},
		Settings: []string{SettingKeyModel, SettingKeyReasoningEffort, SettingKeyApprovalPolicy, SettingKeySandboxMode,
			SettingKeyProviderBaseURL, SettingKeyProviderWireAPI, SettingKeyProviderEnvKey},
		Owned: true, IdlePolicy: IdleAllow, Cells: sevenCells, SandboxAgent: "codex", SecretService: "openai",
		State: []StateVar{{Name: "CODEX_HOME"}}, ConfigEnv: []string{"CODEX_SQLITE_HOME"}, ReadyTimeout: 60 * time.Second},
	{Transport: TransportCopilotSDK, Label: "GitHub Copilot", Command: "copilot", Args: []string{"--headless", "--no-auto-update", "--stdio"},
		Provider: ProviderCopilot, AuthModes: []AuthMode{AuthProviderLogin, AuthAPIKey},
		// A model provider of the operator's (base URL, wire API, key variable) goes into
		// the session configuration: the SDK server ignores COPILOT_PROVIDER_* variables.
		Settings: []string{SettingKeyModel, SettingKeyProviderBaseURL, SettingKeyProviderWireAPI, SettingKeyProviderEnvKey},
		Owned:    true, IdlePolicy: IdleAllow, Cells: sevenCells, SandboxAgent: "copilot",
		// COPILOT_HOME holds its sessions (session-state/<id>) and its login; a connect
		// takes 2-4 s on a 2-core machine.
		State: []StateVar{{Name: "COPILOT_HOME"}}, ConfigEnv: xdgEnv, ReadyTimeout: 90 * time.Second,
		Env: []string{"COPILOT_AUTO_UPDATE=false"}},
	{Transport: TransportClaudeCodeCLI, Label: "Claude Code", Command: "claude",
		Provider: ProviderClaude, AuthModes: []AuthMode{AuthProviderLogin, AuthAPIKey},
		Settings: []string{SettingKeyModel, SettingKeyPermissionMode},
		Owned:    true, IdlePolicy: IdleKeepAlive, Cells: sevenCells, SandboxAgent: "claude", SecretService: "anthropic",
		State: []StateVar{{Name: "CLAUDE_CONFIG_DIR"}}, SessionState: true, ReadyTimeout: 60 * time.Second,
		ReservedArgs: claudeReservedArgs,
		// No update checks, telemetry or error reports from a runtime Jam runs; and MCP tools
		// directly callable (with tool search on, Claude defers them behind a search tool).
		Env: []string{"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "ENABLE_TOOL_SEARCH=false"}},
	{Transport: TransportACP, Label: "ACP agent", Command: "jam-testagent",
		Provider: ProviderACP, AuthModes: []AuthMode{AuthAgentManaged},
		Settings: []string{SettingKeyModel, SettingKeyMode},
		Owned:    true, IdlePolicy: IdleAllow,
		// jam-testagent, the default command, keeps its sessions in JAM_TESTAGENT_STATE_DIR.
		State: []StateVar{{Name: "JAM_TESTAGENT_STATE_DIR"}}, ConfigEnv: xdgEnv, ReadyTimeout: 30 * time.Second},
	{Transport: TransportOpenCode, Label: "OpenCode", Command: "opencode", Args: []string{"acp"},
		Provider: ProviderOpenCode, AuthModes: []AuthMode{AuthAgentManaged},
		Settings: []string{SettingKeyModel, SettingKeyMode},
		Owned:    true, IdlePolicy: IdleAllow, Cells: openCodeCells, SandboxAgent: "opencode",
		// OpenCode keeps its database in $XDG_DATA_HOME/opencode and small state in
		// $XDG_STATE_HOME/opencode; its config and cache stay where the operator has them.
		// Its cold start to the ACP handshake takes 7–10 s on a 2-core machine.
		State:     []StateVar{{Name: "XDG_DATA_HOME", Sub: "data"}, {Name: "XDG_STATE_HOME", Sub: "state"}},
		ConfigEnv: []string{"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR"}, ReadyTimeout: 90 * time.Second},
	{Transport: TransportCursorACP, Label: "Cursor", Command: "cursor-agent", Args: []string{"acp"},
		Provider: ProviderCursor, AuthModes: []AuthMode{AuthProviderLogin},
		Settings: []string{SettingKeyModel},
		Owned:    true, IdlePolicy: IdleAllow, Cells: sevenCells, SandboxAgent: "cursor",
		// cursor-agent keeps its chats (and cli-config.json) in CURSOR_CONFIG_DIR, else
		// $XDG_CONFIG_HOME/cursor, else ~/.cursor.
		State: []StateVar{{Name: "CURSOR_CONFIG_DIR"}}, ConfigEnv: xdgEnv, ReadyTimeout: 60 * time.Second},
	{Transport: TransportAttachInbox, Label: "Attached agent (pull)", Provider: ProviderPull,
		IdlePolicy: IdleAllow},
	{Transport: TransportPTY, Label: "Terminal (legacy)", Provider: ProviderPull, Legacy: true,
		IdlePolicy: IdleAllow},
}

// TransportCatalog returns every catalog row in declaration order.
func TransportCatalog() []TransportSpec { return slices.Clone(transportCatalog) }

// LookupTransport returns the catalog row of a transport.
func LookupTransport(t Transport) (TransportSpec, bool) {
	for _, s := range transportCatalog {
		if s.Transport == t {
			return s, true
		}
	}
	return TransportSpec{}, false
}

// TemplateTransports are the transports a runtime template may choose: the catalog's rows Jam
// runs that are not legacy (attach-inbox describes attached agents; pty loads from old
// records only).
func TemplateTransports() []Transport {
	var out []Transport
	for _, s := range transportCatalog {
		if s.Owned && !s.Legacy {
			out = append(out, s.Transport)
		}
	}
	return out
}

// unknownTransport refuses a transport name the catalog does not know, listing only the
// transports a template may choose (the enum's own message would list the ones it refuses
// next, too).
func unknownTransport() *ValidationError {
	names := make([]string, 0, len(transportCatalog))
	for _, t := range TemplateTransports() {
		names = append(names, string(t))
	}
	return &ValidationError{Field: Transports.Name(), Detail: "must be one of " + strings.Join(names, ", ")}
}

// HasCell reports whether the transport publishes the cell.
func (s TransportSpec) HasCell(c SandboxCell) bool { return slices.Contains(s.Cells, c) }

// ResolvePlacement is the one placement rule: a record written before placement existed ran
// one host per session, so an absent placement is Dedicated, never silently Shared.
func ResolvePlacement(p *Placement) Placement {
	if p == nil || *p == "" {
		return PlacementDedicated
	}
	return *p
}

// Ready is the row's start-handshake bound.
func (s TransportSpec) Ready() time.Duration {
	if s.ReadyTimeout > 0 {
		return s.ReadyTimeout
	}
	return DefaultReadyTimeout
}
