package domain

import "testing"

func TestCompatibilityFingerprintCoversHostWideInputsOnly(t *testing.T) {
	t.Parallel()
	shared := PlacementShared
	base := TemplateConfig{Alias: "a", Transport: TransportCodexAppServer, Args: []string{"app-server"},
		EnvAllowlist: []string{"LANG", "EDITOR"}, Sandbox: SandboxConfig{Enabled: true}, Placement: &shared}
	fp := CompatibilityFingerprint(base, "0.50.0")
	same := base
	same.Alias, same.EnvAllowlist = "b", []string{"EDITOR", "LANG"}
	idle := 30
	same.IdleSecs = &idle
	if CompatibilityFingerprint(same, "0.50.0") != fp {
		t.Fatal("alias, allowlist order or idle threshold changed the host fingerprint")
	}
	explicitDev := base
	explicitDev.NetworkProfile = NetworkDeveloper
	if CompatibilityFingerprint(explicitDev, "0.50.0") != fp {
		t.Fatal("the resolved default network profile differs from the explicit one")
	}
	for name, change := range map[string]func(*TemplateConfig){
		"network profile": func(c *TemplateConfig) { c.NetworkProfile = NetworkProduction },
		"command":         func(c *TemplateConfig) { c.Command = "/opt/codex" },
		"args":            func(c *TemplateConfig) { c.Args = []string{"app-server", "--x"} },
		"allowlist":       func(c *TemplateConfig) { c.EnvAllowlist = []string{"LANG"} },
		"sandbox":         func(c *TemplateConfig) { c.Sandbox.Enabled = false },
		"settings":        func(c *TemplateConfig) { c.Settings = map[string]string{"model": "x"} },
	} {
		c := base
		change(&c)
		if CompatibilityFingerprint(c, "0.50.0") == fp {
			t.Errorf("a different %s kept the fingerprint", name)
		}
	}
	if CompatibilityFingerprint(base, "0.51.0") == fp {
		t.Error("a different runtime version kept the fingerprint")
	}
}
