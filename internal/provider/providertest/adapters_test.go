package providertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/provider/acp"
	"github.com/jam-dev/jam/internal/provider/claudecode"
	"github.com/jam-dev/jam/internal/provider/codex"
	"github.com/jam-dev/jam/internal/provider/copilot"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
)

// caps is an adapter's row of the capability table: what it can do, and so what the suite
// expects of it. A capability it lacks is refused cleanly, which the suite checks.
type caps struct {
	// Steer: messages join a running turn; otherwise Steer returns ErrSteerUnsupported at
	// once and the message is carried over to the next turn.
	Steer bool
	// OversizedSurvives: a protocol message over provider.MaxProtocolLine is skipped and the
	// runtime goes on (a line without being buffered whole, a Content-Length frame unread);
	// otherwise the adapter ends the runtime cleanly.
	OversizedSurvives bool
	// HandshakeExitClassified: a child that exits during the start handshake always fails
	// Prepare with ErrRuntimeExited; otherwise with that or, when the protocol client saw its
	// stream end before the exit was reaped, its own "connection closed" (the Lifecycle
	// adapters, racing the two), still at once and leaving nothing behind.
	HandshakeExitClassified bool
	// RetryDelivered: the CLI delivers a model's second call under the same call id (Jam
	// answers it once, from its replay cache or as the same disposition); otherwise the CLI
	// drops the repeated call itself (Claude Code) and the turn goes on without it.
	RetryDelivered bool
	// CarriesOnAfterDenial: after a denied permission the agent goes on with its turn and
	// answers; otherwise the agent ends its turn at the denial (OpenCode), and the message
	// is settled without an answer rather than left queued.
	CarriesOnAfterDenial bool
}

// adapter is one row of the suite: the adapter, its real binary, and how a lane builds its
// spec and scripts its model.
type adapter struct {
	name string
	// command is the real CLI (found with realagent.Require); "" is jam-testagent, built
	// from this module.
	command   string
	transport domain.Transport
	factory   provider.Factory
	caps      caps
	// framing is how the wrapper reads the CLI's stdout ("content-length" or lines).
	framing string
	// mcp: the adapter reaches Jam's tools over MCP (else through Spec.Tools natively).
	mcp bool
	// modelDriven: the CLI asks the scripted model (jam-testagent answers by directives).
	modelDriven bool
	// args, env and settings build the lane's spec.
	args     func(l *lane) []string
	env      func(l *lane) []string
	settings func(l *lane) map[string]string
	// stateDir: the adapter keeps its provider state in Spec.StateDir.
	stateDir bool
	// shell is the model's call of the CLI's own shell tool that runs command (nil: the
	// CLI has none the suite can ask for).
	shell func(r stubmodel.Request, command string) *stubmodel.ToolCall
	// unknownThread is a well-formed provider session id no provider has.
	unknownThread func() string
	// maxLanes bounds how many of the adapter's lanes run at once (0: no bound beyond the
	// suite's): a CLI whose start is heavy starves its own handshakes when several start on
	// two cores at once.
	maxLanes int
	// warm, when set, runs once per test binary before the adapter's first lane goes on
	// (its other lanes wait for it): a start that fills a cache the lanes share.
	warm func(l *lane) error
}

// say is how a scenario asks for a behaviour: jam-testagent reads its directives; the
// scripted model (script.go) reads the suite's markers.
func (a adapter) say(kind string) string {
	if a.modelDriven {
		return map[string]string{"reply": "", "retry": markRetry, "steer": markSteer, "wedge": markWedge,
			"permission": markPermission, "count": ""}[kind]
	}
	return map[string]string{"reply": "[[reply-tool]]", "retry": "[[retry-reply-tool]]", "steer": "[[slow 2]] [[reply-tool]]",
		"wedge": "[[wedge]]", "permission": "[[permission execute]]", "count": "[[count]]"}[kind]
}

// openCodeConfig points opencode at the stub model the way an operator points it at their
// own endpoint, and makes it ask before running a shell command.
func openCodeConfig(baseURL string) string {
	return `{"$schema":"https://opencode.ai/config.json","model":"stub/stub-model","autoupdate":false,` +
		`"permission":{"bash":"ask","edit":"ask"},` +
		`"provider":{"stub":{"npm":"@ai-sdk/openai-compatible","name":"stub","options":{"baseURL":"` + baseURL +
		`/v1","apiKey":"x"},"models":{"stub-model":{"name":"stub"}}}}}`
}

// openCodeConfigHome is the XDG_CONFIG_HOME every opencode of the suite shares: opencode
// installs its plugin packages there (tens of MiB, a minute on two busy cores) when it
// starts with an empty one, and five lanes doing that at once do not finish a handshake in
// time. It is a cache kept under the user's cache directory per opencode version, so only
// the first run on a machine pays for the install.
var openCodeConfigHome string

// warmOpenCode starts and stops one opencode, so the packages it installs at its first start
// are in openCodeConfigHome before the lanes start theirs.
func warmOpenCode(l *lane) error {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	openCodeConfigHome = filepath.Join(cache, "jam-providertest", "opencode-"+filepath.Base(l.exeVersion)+"-config")
	if err := os.MkdirAll(openCodeConfigHome, 0o700); err != nil {
		return fmt.Errorf("opencode's shared configuration: %w", err)
	}
	in := l.build("", 1)
	if _, err := in.prepare(); err != nil {
		return fmt.Errorf("warm opencode's shared configuration: %w", err)
	}
	return in.rt.Teardown(context.Background(), domain.CheckpointBeforeStop)
}

// claudeModel is a model id claude accepts (it refuses an unknown one before any request).
const claudeModel = "claude-sonnet-4-5"

func pathEnv() string { return "PATH=" + os.Getenv("PATH") }

// openAISettings point Codex and Copilot at the stub model's OpenAI dialects.
func openAISettings(l *lane) map[string]string {
	return map[string]string{domain.SettingKeyModel: stubmodel.Model,
		domain.SettingKeyProviderBaseURL: l.model.URL + "/v1", domain.SettingKeyProviderEnvKey: "STUB_MODEL_KEY"}
}

var adapters = []adapter{
	{
		name: "jam-testagent", transport: domain.TransportACP, factory: acp.New, mcp: true,
		caps:          caps{Steer: false, OversizedSurvives: true, RetryDelivered: true, CarriesOnAfterDenial: true},
		args:          func(l *lane) []string { return []string{"--state-dir", l.state} },
		env:           func(*lane) []string { return os.Environ() },
		unknownThread: func() string { return "tas_" + strings.Repeat("0", 24) },
	},
	{
		name: "opencode", command: "opencode", transport: domain.TransportOpenCode, factory: acp.New, mcp: true, modelDriven: true,
		caps: caps{Steer: false, OversizedSurvives: true, RetryDelivered: true, CarriesOnAfterDenial: false},
		args: func(*lane) []string { row, _ := domain.LookupTransport(domain.TransportOpenCode); return row.Args },
		env: func(l *lane) []string {
			return []string{pathEnv(), "HOME=" + l.home, "OPENCODE_CONFIG_CONTENT=" + openCodeConfig(l.model.URL),
				"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
				"XDG_CONFIG_HOME=" + openCodeConfigHome, "XDG_DATA_HOME=" + filepath.Join(l.home, "data"),
				"XDG_CACHE_HOME=" + filepath.Join(l.home, "cache"), "XDG_STATE_HOME=" + filepath.Join(l.home, "state")}
		},
		shell: func(r stubmodel.Request, command string) *stubmodel.ToolCall {
			return &stubmodel.ToolCall{Name: r.ToolName("bash"), Arguments: map[string]any{"command": command, "description": "make a file"}}
		},
		unknownThread: func() string { return "ses_" + strings.Repeat("0", 26) },
		warm:          warmOpenCode,
		// Each opencode start is a Bun process compiling its app and opening its database:
		// four at once on two busy cores take minutes to answer initialize.
		maxLanes: 2,
	},
	{
		name: "codex", command: "codex", transport: domain.TransportCodexAppServer, factory: codex.New, modelDriven: true,
		caps: caps{Steer: true, OversizedSurvives: true, RetryDelivered: true, CarriesOnAfterDenial: true},
		args: func(*lane) []string { return []string{"app-server"} },
		env: func(l *lane) []string {
			return []string{pathEnv(), "HOME=" + l.home, "CODEX_HOME=" + filepath.Join(l.home, "codex"), "STUB_MODEL_KEY=x"}
		},
		settings: func(l *lane) map[string]string {
			s := openAISettings(l)
			s[domain.SettingKeyApprovalPolicy] = "untrusted" // every command is asked
			return s
		},
		shell: func(_ stubmodel.Request, command string) *stubmodel.ToolCall {
			return &stubmodel.ToolCall{Name: "exec_command", Arguments: map[string]any{"cmd": command}}
		},
		unknownThread: func() string { return "0190d0c5-0000-7000-8000-000000000000" },
	},
	{
		name: "claude", command: "claude", transport: domain.TransportClaudeCodeCLI, factory: claudecode.New, mcp: true,
		modelDriven: true, stateDir: true,
		caps: caps{Steer: true, OversizedSurvives: true, RetryDelivered: false, CarriesOnAfterDenial: true},
		args: func(*lane) []string { return nil },
		env: func(l *lane) []string {
			row, _ := domain.LookupTransport(domain.TransportClaudeCodeCLI)
			return append([]string{pathEnv(), "HOME=" + l.state, "CLAUDE_CONFIG_DIR=" + l.state,
				"ANTHROPIC_BASE_URL=" + l.model.URL, "ANTHROPIC_API_KEY=x"}, row.Env...)
		},
		settings: func(*lane) map[string]string { return map[string]string{domain.SettingKeyModel: claudeModel} },
		shell: func(_ stubmodel.Request, command string) *stubmodel.ToolCall {
			return &stubmodel.ToolCall{Name: "Bash", Arguments: map[string]any{"command": command, "description": "make a file"}}
		},
		unknownThread: uuid.NewString,
	},
	{
		name: "copilot", command: "copilot", transport: domain.TransportCopilotSDK, factory: copilot.New, modelDriven: true,
		framing: "content-length",
		caps:    caps{Steer: true, OversizedSurvives: true, RetryDelivered: true, CarriesOnAfterDenial: true},
		args:    func(*lane) []string { return []string{"--headless", "--no-auto-update", "--stdio"} },
		env: func(l *lane) []string {
			return []string{pathEnv(), "HOME=" + l.home, "COPILOT_HOME=" + filepath.Join(l.home, "copilot"),
				"COPILOT_AUTO_UPDATE=false", "STUB_MODEL_KEY=x"}
		},
		settings: openAISettings,
		shell: func(r stubmodel.Request, command string) *stubmodel.ToolCall {
			return &stubmodel.ToolCall{Name: r.ToolName("bash"),
				Arguments: map[string]any{"command": command, "description": "make a file", "mode": "sync", "initial_wait": 10}}
		},
		unknownThread: uuid.NewString,
	},
}
