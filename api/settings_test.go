package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jam-dev/jam/internal/domain"
)

// A pin in runtime.defaults.provider_executables is a path that will be run, exactly as a
// template's command is: it must be a clean absolute path (so /tmp/../x is refused, with a
// validation naming the pin), and it is checked syntactically at save, as a template's
// command is (so /etc/passwd is saved, like a template naming it, and refused where it would
// run: provider.ResolveExecutable verifies a pin like an explicit command, see
// TestAPinThatIsNotAnExecutableFileIsRefusedWhereItRuns). Keys must be command names.
func TestProviderExecutablePinsAreValidatedLikeTemplateCommands(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var owned AgentBody
	h.mustCall(http.MethodPost, "/v1/agents", testToken, CreateAgentRequest{Name: "builder", Kind: domain.AgentOwned}, &owned, 201)
	pinPath := "/v1/settings/" + domain.SettingProviderExecutables
	for i, path := range []string{"/tmp/../x", "/etc/passwd", "relative/agent", "/usr/bin/", "/usr//bin/agent", "/usr/./bin/agent", "/opt/agent/bin/agent"} {
		tmpl := h.call(http.MethodPost, "/v1/agents/"+owned.ID.String()+"/templates", testToken,
			CreateTemplateRequest{domain.TemplateConfig{Alias: fmt.Sprintf("t%d", i), Transport: domain.TransportACP, Command: path}}, nil)
		pin := h.call(http.MethodPut, pinPath, testToken, PutSettingRequest{Value: json.RawMessage(fmt.Sprintf(`{"opencode": %q}`, path))}, nil)
		if (tmpl.status == 201) != (pin.status == 200) {
			t.Fatalf("%s: a template command answers %d but a pin %d: %s", path, tmpl.status, pin.status, pin.body)
		}
		if pin.status == 200 {
			continue
		}
		e := pin.errorBody(t)
		if pin.status != 400 || e.Code != domain.CodeValidation || len(e.Validations) != 1 ||
			e.Validations[0].Field != "value.opencode" || !strings.Contains(e.Validations[0].Detail, "clean absolute path") {
			t.Fatalf("%s: pin refused as %d %+v", path, pin.status, e)
		}
	}
	if r := h.call(http.MethodPut, pinPath, testToken, PutSettingRequest{Value: json.RawMessage(`{"opencode": "/tmp/../x"}`)}, nil); r.status != 400 {
		t.Fatalf("/tmp/../x: %d", r.status)
	}
	if r := h.call(http.MethodPut, pinPath, testToken, PutSettingRequest{Value: json.RawMessage(`{"opencode": "/etc/passwd"}`)}, nil); r.status != 200 {
		t.Fatalf("/etc/passwd (syntactically a template command): %d %s", r.status, r.body)
	}

	// Every bad pin is reported, each under its own field; a bad one stores nothing.
	r := h.call(http.MethodPut, pinPath, testToken, PutSettingRequest{Value: json.RawMessage(
		`{"../evil": "/opt/evil", "codex": "codex", "claude": "/opt/claude/bin/claude"}`)}, nil)
	e := r.errorBody(t)
	fields := map[string]bool{}
	for _, v := range e.Validations {
		fields[v.Field] = true
	}
	if r.status != 400 || len(e.Validations) != 2 || !fields["value.../evil"] || !fields["value.codex"] {
		t.Fatalf("bad pins: %d %+v", r.status, e.Validations)
	}
	var got SettingBody
	h.mustCall(http.MethodGet, pinPath, testToken, nil, &got, 200)
	if string(got.Value) != `{"opencode":"/etc/passwd"}` {
		t.Fatalf("stored after a refused save: %s", got.Value)
	}
}
