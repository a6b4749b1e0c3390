package domain

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// TemplateConfig is the body of a runtime template: how an owned agent's runtime is launched.
// Rooms copy it when the agent joins them.
type TemplateConfig struct {
	Alias          string            `json:"alias"`
	Transport      Transport         `json:"transport"`
	Command        string            `json:"command,omitempty"`
	Args           []string          `json:"args"`
	EnvAllowlist   []string          `json:"env_allowlist"`
	AuthMode       AuthMode          `json:"auth_mode,omitempty"`
	Settings       map[string]string `json:"settings,omitempty"`
	Sandbox        SandboxConfig     `json:"sandbox"`
	Placement      *Placement        `json:"placement,omitempty"`
	NetworkProfile NetworkProfile    `json:"network_profile,omitempty"`
	IdlePolicy     IdlePolicy        `json:"idle_policy,omitempty"`
	// IdleSecs overrides the idle-reap threshold for this runtime.
	IdleSecs *int `json:"idle_secs,omitempty"`
	// Watchdog bounds the live provider (memory, idle CPU, wedged turns); unset fields take
	// the runtime.defaults.watchdog setting.
	Watchdog *Watchdog `json:"watchdog,omitempty"`
	// ResumePolicy is the session's continuity contract when its provider thread cannot be
	// resumed: exact (the default) fails closed and offers an operator's evidence-bound
	// start-fresh; fresh continues on a new thread and tells the room.
	ResumePolicy ResumePolicy `json:"resume_policy,omitempty"`
	// Repositories are cloned into each new session workspace before the room's first turn
	// (sandboxed, managed workspaces).
	Repositories []TemplateRepository `json:"repositories,omitempty"`
}

// SandboxConfig says whether and how a runtime runs inside a Docker Sandboxes microVM.
type SandboxConfig struct {
	Enabled             bool                `json:"enabled"`
	ConfigurationSource ConfigurationSource `json:"configuration_source,omitempty"`
	WorkspaceSource     WorkspaceSource     `json:"workspace_source,omitempty"`
	// HostPath is the checkout of PrivateHostClone and DirectHost workspaces.
	HostPath string `json:"host_path,omitempty"`
	// Files are the operator's Docker environment files (DockerEnvironment only).
	Files []string `json:"files,omitempty"`
}

// DirectHostPath is the operator's directory a host-native runtime works in ("" when its
// workspace is the managed one in its host root).
func (c SandboxConfig) DirectHostPath() string {
	if c.WorkspaceSource == WorkspaceDirectHost {
		return c.HostPath
	}
	return ""
}

// Template limits.
const (
	MaxTemplateArgs    = 64
	MaxTemplateArgLen  = 4096
	MaxEnvAllowlist    = 128
	MaxTemplateSetting = 1024
	MaxIdleSecs        = 7 * 24 * 3600
)

var (
	aliasPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,39}$`)
	envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// custodyEnvKeys hold an agent's own credentials; they never enter a runtime's environment.
var custodyEnvKeys = []string{"JAM_AGENT_KEY", "JAM_API_TOKEN", "JAM_TOKEN"}

// IsCustodyEnvKey reports whether name is an agent or operator credential variable, or a
// suffixed form of one (JAM_AGENT_KEY_2).
func IsCustodyEnvKey(name string) bool {
	upper := strings.ToUpper(name)
	for _, k := range custodyEnvKeys {
		if upper == k || strings.HasPrefix(upper, k+"_") {
			return true
		}
	}
	return false
}

// IsJamEnvKey reports whether name is one of Jam's own configuration variables (database
// URL, listen addresses, tokens): none enters a runtime unless Jam hands it deliberately.
func IsJamEnvKey(name string) bool { return strings.HasPrefix(strings.ToUpper(name), "JAM_") }

// IsSecretLikeEnvKey reports whether a name looks like it carries a secret.
func IsSecretLikeEnvKey(name string) bool {
	upper := strings.ToUpper(name)
	for _, marker := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "PRIVATE_KEY", "CREDENTIAL"} {
		if strings.Contains(upper, marker) {
			return true
		}
	}
	return false
}

// IsEnvName reports whether name is a well-formed environment variable name.
func IsEnvName(name string) bool { return envNamePattern.MatchString(name) }

// ValidateExecutablePath checks a path an operator names as the executable of a command (a
// template's command, a pin in runtime.defaults.provider_executables): absolute and already
// clean (no "." or ".." elements, no doubled or trailing slash), so the path shown is the
// path run. It is syntactic: whether the file exists and is executable is verified where it
// runs, on its node, when the runtime starts (provider.ResolveExecutable), so a save never
// depends on the machine that serves the API.
func ValidateExecutablePath(path string) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || strings.ContainsRune(path, 0) {
		return &ValidationError{Field: "path", Detail: "must be a clean absolute path"}
	}
	return nil
}

// ValidateAlias checks an operator-facing alias.
func ValidateAlias(field, alias string) error {
	if !aliasPattern.MatchString(alias) {
		return &ValidationError{Field: field, Detail: "must be 1-40 lowercase letters, digits, '-' or '_', starting with a letter or digit"}
	}
	return nil
}

// Validate checks the template against the transport catalog and reports every problem.
func (c TemplateConfig) Validate() error {
	var v Validations
	if err := ValidateAlias("alias", c.Alias); err != nil {
		v.AddErr("alias", err)
	}
	spec, ok := LookupTransport(c.Transport)
	switch {
	case c.Transport == "":
		v.Add("transport", "required")
	case !ok:
		v.AddErr("transport", unknownTransport())
	case spec.Legacy:
		v.Add("transport", fmt.Sprintf("%s is a legacy transport and can no longer run; choose another transport", c.Transport))
	case !spec.Owned:
		v.Add("transport", fmt.Sprintf("%s is for attached agents; a runtime template needs a transport Jam runs", c.Transport))
	}
	if c.Command != "" && ValidateExecutablePath(c.Command) != nil {
		v.Add("command", "must be a clean absolute path (leave it empty to resolve the transport's default)")
	}
	if len(c.Args) > MaxTemplateArgs {
		v.Add("args", fmt.Sprintf("at most %d arguments", MaxTemplateArgs))
	}
	for i, a := range c.Args {
		if len(a) > MaxTemplateArgLen || strings.ContainsRune(a, 0) {
			v.Add(fmt.Sprintf("args[%d]", i), fmt.Sprintf("at most %d bytes and no NUL", MaxTemplateArgLen))
		}
		if flag, _, _ := strings.Cut(a, "="); ok && slices.Contains(spec.ReservedArgs, flag) {
			v.Add(fmt.Sprintf("args[%d]", i), fmt.Sprintf("%s is set by Jam for %s and cannot be given in args", flag, spec.Label))
		}
	}
	c.validateEnv(&v)
	if ok && spec.Owned {
		if c.AuthMode != "" && !slices.Contains(spec.AuthModes, c.AuthMode) {
			v.Add("auth_mode", fmt.Sprintf("%s supports %s", spec.Label, joinValues(spec.AuthModes)))
		}
		for key, val := range c.Settings {
			if !slices.Contains(spec.Settings, key) {
				v.Add("settings."+key, fmt.Sprintf("not a %s setting (known: %s)", spec.Label, strings.Join(spec.Settings, ", ")))
			} else if len(val) > MaxTemplateSetting {
				v.Add("settings."+key, fmt.Sprintf("at most %d bytes", MaxTemplateSetting))
			}
		}
		c.validateSettingValues(&v)
		c.validateSandbox(spec, &v)
	}
	if c.Placement != nil && !Placements.Has(*c.Placement) {
		v.AddErr("placement", mustParse(Placements, string(*c.Placement)))
	}
	if c.NetworkProfile != "" && !NetworkProfiles.Has(c.NetworkProfile) {
		v.AddErr("network_profile", mustParse(NetworkProfiles, string(c.NetworkProfile)))
	}
	if c.IdlePolicy != "" && !IdlePolicies.Has(c.IdlePolicy) {
		v.AddErr("idle_policy", mustParse(IdlePolicies, string(c.IdlePolicy)))
	}
	if c.ResumePolicy != "" && !ResumePolicies.Has(c.ResumePolicy) {
		v.AddErr("resume_policy", mustParse(ResumePolicies, string(c.ResumePolicy)))
	}
	if c.IdleSecs != nil && (*c.IdleSecs < 1 || *c.IdleSecs > MaxIdleSecs) {
		v.Add("idle_secs", fmt.Sprintf("must be between 1 and %d", MaxIdleSecs))
	}
	if c.Watchdog != nil {
		c.Watchdog.Validate("watchdog.", &v)
	}
	if len(c.Repositories) > 0 {
		if src := c.Sandbox.WorkspaceSource; !c.Sandbox.Enabled || (src != "" && src != WorkspaceManaged) {
			v.Add("repositories", "are cloned into a sandboxed runtime's managed workspace: enable the sandbox with a managed workspace")
		}
		ValidateTemplateRepositories(c.Repositories, &v)
	}
	return v.Err()
}

func (c TemplateConfig) validateEnv(v *Validations) {
	if len(c.EnvAllowlist) > MaxEnvAllowlist {
		v.Add("env_allowlist", fmt.Sprintf("at most %d names", MaxEnvAllowlist))
	}
	seen := map[string]bool{}
	for i, name := range c.EnvAllowlist {
		field := fmt.Sprintf("env_allowlist[%d]", i)
		switch {
		case !envNamePattern.MatchString(name):
			v.Add(field, "must be an environment variable name")
		case IsCustodyEnvKey(name):
			v.Add(field, name+" holds an agent or operator credential and never enters a runtime")
		case IsJamEnvKey(name):
			v.Add(field, name+" is Jam's own configuration and never enters a runtime")
		case c.Sandbox.Enabled && IsSecretLikeEnvKey(name):
			v.Add(field, name+" looks like a secret; a sandboxed runtime receives credentials only as Docker service secrets")
		case seen[name]:
			v.Add(field, "listed twice")
		}
		seen[name] = true
	}
}

func (c TemplateConfig) validateSandbox(spec TransportSpec, v *Validations) {
	s := c.Sandbox
	placement := ResolvePlacement(c.Placement)
	if !s.Enabled {
		if s.ConfigurationSource != "" || s.WorkspaceSource != "" || s.HostPath != "" || len(s.Files) > 0 {
			v.Add("sandbox", "configuration_source, workspace_source, host_path and files need sandbox.enabled")
		}
		if placement == PlacementShared {
			v.Add("placement", "shared_agent_host needs a sandboxed runtime (sandbox.enabled)")
		}
		return
	}
	if s.ConfigurationSource != "" && !ConfigurationSources.Has(s.ConfigurationSource) {
		v.AddErr("sandbox.configuration_source", mustParse(ConfigurationSources, string(s.ConfigurationSource)))
		return
	}
	if s.WorkspaceSource != "" && !WorkspaceSources.Has(s.WorkspaceSource) {
		v.AddErr("sandbox.workspace_source", mustParse(WorkspaceSources, string(s.WorkspaceSource)))
		return
	}
	cell := SandboxCell{Configuration: s.ConfigurationSource, Workspace: s.WorkspaceSource, Placement: placement}
	if cell.Configuration == "" {
		cell.Configuration = ConfigJamManaged
	}
	if cell.Workspace == "" {
		cell.Workspace = WorkspaceManaged
	}
	if len(spec.Cells) == 0 {
		v.Add("sandbox.enabled", spec.Label+" cannot run in a Docker sandbox")
	} else if !spec.HasCell(cell) {
		v.Add("sandbox", fmt.Sprintf("%s does not support %s configuration with a %s workspace on a %s host",
			spec.Label, cell.Configuration, cell.Workspace, cell.Placement))
	}
	needsPath := cell.Workspace == WorkspacePrivateHostClone || cell.Workspace == WorkspaceDirectHost
	switch {
	case needsPath && s.HostPath == "":
		v.Add("sandbox.host_path", "required for a "+string(cell.Workspace)+" workspace")
	case needsPath && (!filepath.IsAbs(s.HostPath) || filepath.Clean(s.HostPath) != s.HostPath):
		v.Add("sandbox.host_path", "must be a clean absolute path")
	case !needsPath && s.HostPath != "":
		v.Add("sandbox.host_path", "only private_host_clone and direct_host workspaces take a host path")
	}
	if cell.Configuration == ConfigDockerEnvironment {
		if len(s.Files) == 0 {
			v.Add("sandbox.files", "docker_environment needs at least one environment file")
		}
		for i, f := range s.Files {
			if !filepath.IsAbs(f) || filepath.Clean(f) != f {
				v.Add(fmt.Sprintf("sandbox.files[%d]", i), "must be a clean absolute path")
			}
		}
	} else if len(s.Files) > 0 {
		v.Add("sandbox.files", "only a docker_environment configuration takes files")
	}
}

// Normalized returns the template with every default written out, so stored records carry
// the resolved placement and never depend on a default changing later.
func (c TemplateConfig) Normalized() TemplateConfig {
	spec, _ := LookupTransport(c.Transport)
	out := c
	p := ResolvePlacement(c.Placement)
	out.Placement = &p
	if out.Args == nil {
		out.Args = []string{}
	}
	if out.EnvAllowlist == nil {
		out.EnvAllowlist = []string{}
	}
	if out.NetworkProfile == "" {
		out.NetworkProfile = NetworkDeveloper
	}
	if out.AuthMode == "" && len(spec.AuthModes) > 0 {
		out.AuthMode = spec.AuthModes[0]
	}
	if out.IdlePolicy == "" {
		out.IdlePolicy = spec.IdlePolicy
	}
	if out.ResumePolicy == "" {
		out.ResumePolicy = ResumeExact
	}
	if out.Sandbox.Enabled {
		if out.Sandbox.ConfigurationSource == "" {
			out.Sandbox.ConfigurationSource = ConfigJamManaged
		}
		if out.Sandbox.WorkspaceSource == "" {
			out.Sandbox.WorkspaceSource = WorkspaceManaged
		}
	}
	return out
}

func joinValues[T ~string](vs []T) string {
	s := make([]string, len(vs))
	for i, x := range vs {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

// ResumePolicy is what a session does when its bound provider thread cannot be resumed.
type ResumePolicy string

const (
	// ResumeExact: the session is under an exact-resume contract: it fails closed (held
	// failed, exact_resume_unavailable) and an operator may start it fresh, bound to the
	// evidence they inspected.
	ResumeExact ResumePolicy = "exact"
	// ResumeFresh: the session continues on a new provider thread and the room is told.
	ResumeFresh ResumePolicy = "fresh"
)

var ResumePolicies = NewEnum("resume_policy", ResumeExact, ResumeFresh)

func (v *ResumePolicy) UnmarshalText(b []byte) error { return unmarshalEnum(ResumePolicies, b, v) }

// RequiresExactResume reports whether the session's thread must be resumed exactly ("" is
// exact: the default).
func (c TemplateConfig) RequiresExactResume() bool { return c.ResumePolicy != ResumeFresh }

// Template is a stored runtime template of an owned agent. Its id is immutable and is copied
// into every room session made from it, so rooms of one template can share a host.
type Template struct {
	ID                  uuid.UUID
	AgentID             uuid.UUID
	Config              TemplateConfig
	DesiredGeneration   int64
	EffectiveGeneration int64
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// ApplyMode says what saving a template does to the rooms made from it.
type ApplyMode string

const (
	// ApplyNewSessionsOnly leaves room sessions as they are; rooms joined later use the save.
	ApplyNewSessionsOnly ApplyMode = "new_sessions_only"
	// ApplyAndRestart applies the save to every room (the TemplateApply workflow).
	ApplyAndRestart ApplyMode = "apply_and_restart"
)

var ApplyModes = NewEnum("apply_mode", ApplyNewSessionsOnly, ApplyAndRestart)

func (v *ApplyMode) UnmarshalText(b []byte) error { return unmarshalEnum(ApplyModes, b, v) }
