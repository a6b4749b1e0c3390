package domain

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Template setting keys (a transport's catalog row names the ones it takes).
const (
	SettingKeyModel           = "model"
	SettingKeyMode            = "mode"
	SettingKeyReasoningEffort = "reasoning_effort"
	SettingKeyApprovalPolicy  = "approval_policy"
	SettingKeySandboxMode     = "sandbox_mode"
	SettingKeyPermissionMode  = "permission_mode"
	// SettingKeyProviderBaseURL, SettingKeyProviderWireAPI and SettingKeyProviderEnvKey
	// point a runtime at a model provider of the operator's: its base URL, the API it speaks
	// and the variable holding its key (which the template's env_allowlist must name).
	SettingKeyProviderBaseURL = "model_provider_base_url"
	SettingKeyProviderWireAPI = "model_provider_wire_api"
	SettingKeyProviderEnvKey  = "model_provider_env_key"
)

// settingValues are the settings whose values come from a fixed set (the provider's own words).
var settingValues = map[string][]string{
	SettingKeyReasoningEffort: {"minimal", "low", "medium", "high", "xhigh"},
	SettingKeyApprovalPolicy:  {"untrusted", "on-failure", "on-request", "never"},
	SettingKeySandboxMode:     {"read-only", "workspace-write", "danger-full-access"},
	SettingKeyProviderWireAPI: {"responses", "chat"},
	// Claude Code's permission modes; bypassPermissions skips the permission broker.
	SettingKeyPermissionMode: {"default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"},
}

// validateSettingValues checks the values of known settings: fixed sets, an http(s) base
// URL, and a key variable the allowlist passes (a runtime sees no variable it does not name).
func (c TemplateConfig) validateSettingValues(v *Validations) {
	for key, val := range c.Settings {
		field := "settings." + key
		if allowed, ok := settingValues[key]; ok && !slices.Contains(allowed, val) {
			v.Add(field, "want one of "+strings.Join(allowed, ", "))
		}
		switch key {
		case SettingKeyProviderBaseURL:
			u, err := url.Parse(val)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
				v.Add(field, "must be an http or https URL without credentials")
			}
		case SettingKeyProviderEnvKey:
			switch {
			case !IsEnvName(val) || IsCustodyEnvKey(val) || IsJamEnvKey(val):
				v.Add(field, "must name an environment variable that is not Jam's")
			case !slices.Contains(c.EnvAllowlist, val):
				v.Add(field, fmt.Sprintf("%s must also be in env_allowlist, or the runtime never sees it", val))
			}
		}
	}
	_, hasKey := c.Settings[SettingKeyProviderEnvKey]
	_, hasAPI := c.Settings[SettingKeyProviderWireAPI]
	if _, hasURL := c.Settings[SettingKeyProviderBaseURL]; (hasKey || hasAPI) && !hasURL {
		v.Add("settings."+SettingKeyProviderBaseURL, "required with a model provider's wire API or key")
	}
}
