package main

import (
	"encoding/json"
	"testing"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/internal/domain"
)

// `jam template create --setting K=V` carries transport settings (a Codex model provider,
// say); a setting without "=" is refused before anything is sent.
func TestTemplateFlagsCarrySettings(t *testing.T) {
	var f templateFlags
	cmd := &cobra.Command{}
	f.register(cmd)
	if err := cmd.Flags().Parse([]string{"--transport", "codex-app-server", "--setting", "model=gpt-5",
		"--setting", "model_provider_base_url=http://127.0.0.1:11434/v1", "--env", "OLLAMA_KEY"}); err != nil {
		t.Fatal(err)
	}
	raw, err := f.body(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var c domain.TemplateConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if c.Settings["model"] != "gpt-5" || c.Settings["model_provider_base_url"] != "http://127.0.0.1:11434/v1" {
		t.Fatalf("settings %v", c.Settings)
	}
	var bad templateFlags
	cmd = &cobra.Command{}
	bad.register(cmd)
	_ = cmd.Flags().Parse([]string{"--transport", "codex-app-server", "--setting", "model"})
	if _, err := bad.body(cmd); err == nil {
		t.Fatal("a setting without = was accepted")
	}
}

// `--auth-mode` and `--idle-policy` reach the template (a Claude Code runtime with an API
// key that may be reaped when idle).
func TestTemplateFlagsCarryAuthModeAndIdlePolicy(t *testing.T) {
	var f templateFlags
	cmd := &cobra.Command{}
	f.register(cmd)
	if err := cmd.Flags().Parse([]string{"--transport", "claude-code-cli", "--auth-mode", "api_key", "--idle-policy", "allow",
		"--env", "ANTHROPIC_API_KEY"}); err != nil {
		t.Fatal(err)
	}
	raw, err := f.body(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var c domain.TemplateConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if c.AuthMode != domain.AuthAPIKey || c.IdlePolicy != domain.IdleAllow || c.Validate() != nil {
		t.Fatalf("template %+v: %v", c, c.Validate())
	}
}
