package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/contract"
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

// applyAPI answers a template save with apply_and_restart (202 and its operation) and the
// operation's poll with op.
func applyAPI(t *testing.T, op api.OperationResource) (string, api.TemplateSaveBody) {
	t.Helper()
	saved := api.TemplateSaveBody{TemplateBody: api.TemplateBody{ID: uuid.New(), DesiredGeneration: 3, TemplateConfig: domain.TemplateConfig{Transport: domain.TransportACP}},
		Operation: &api.TemplateApplyOperation{ID: op.ID, WorkflowID: op.WorkflowID, Generation: 3}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/v1/templates/"+saved.ID.String():
			w.WriteHeader(http.StatusAccepted)
			_ = json.NewEncoder(w).Encode(saved)
		case r.Method == http.MethodGet && r.URL.Path == "/v1/operations/"+op.ID.String():
			_ = json.NewEncoder(w).Encode(op)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, saved
}

// `jam template save --apply-mode apply_and_restart` waits for the apply and prints one
// line per room; -q prints only the id; a failed apply fails the command.
func TestTemplateSaveWaitsForTheApply(t *testing.T) {
	one, two := uuid.New(), uuid.New()
	result, _ := json.Marshal(contract.TemplateApplyResult{Sessions: []contract.TemplateApplyOne{{ID: one}, {ID: two}}})
	op := api.OperationResource{ID: uuid.New(), Kind: domain.OpKindTemplateApply, Status: domain.OperationSucceeded, Result: result}
	url, saved := applyAPI(t, op)
	id := saved.ID.String()
	args := []string{"template", "save", id, "--transport", "acp", "--apply-mode", "apply_and_restart", "--url", url, "--token", "tok"}

	out := runCLI(t, args...)
	for _, want := range []string{"saved template " + id + " at generation 3; applying it to its rooms",
		"runtime session " + one.String() + ": took generation 3", "runtime session " + two.String() + ": took generation 3"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if out := runCLI(t, append(args, "-q")...); out != id+"\n" {
		t.Fatalf("-q printed %q", out)
	}
	if out := runCLI(t, append(args, "--no-wait")...); !strings.Contains(out, "jam operation wait "+op.ID.String()) {
		t.Fatalf("--no-wait printed %q", out)
	}
	var body api.TemplateSaveBody
	if err := json.Unmarshal([]byte(runCLI(t, append(args, "--json")...)), &body); err != nil || body.ID != saved.ID {
		t.Fatalf("--json printed %+v: %v", body, err)
	}

	failed := api.OperationResource{ID: uuid.New(), Kind: domain.OpKindTemplateApply, Status: domain.OperationFailed,
		Failure: &api.OperationFailure{Status: 422, Code: "precondition_failed", Message: "1 of 1 rooms and hosts did not take generation 3"}}
	url, saved = applyAPI(t, failed)
	out, err := runCLIErr(t, "template", "save", saved.ID.String(), "--transport", "acp", "--apply-mode", "apply_and_restart", "--url", url, "--token", "tok")
	if err == nil || !strings.Contains(err.Error(), "did not take generation 3") {
		t.Fatalf("a failed apply: %v\n%s", err, out)
	}
}

// A save for new sessions only prints a line, or its id under -q.
func TestTemplateSaveForNewSessionsPrintsALine(t *testing.T) {
	saved := api.TemplateSaveBody{TemplateBody: api.TemplateBody{ID: uuid.New(), DesiredGeneration: 2, TemplateConfig: domain.TemplateConfig{Transport: domain.TransportACP}}}
	var f fakeAPI
	url := f.serve(t, saved)
	args := []string{"template", "save", saved.ID.String(), "--transport", "acp", "--url", url, "--token", "tok"}
	if out := runCLI(t, args...); !strings.HasPrefix(out, "saved template "+saved.ID.String()+" at generation 2: new rooms use it") {
		t.Fatalf("printed %q", out)
	}
	if f.method != http.MethodPut || f.path != "/v1/templates/"+saved.ID.String() {
		t.Fatalf("sent %+v", f)
	}
	if out := runCLI(t, append(args, "-q")...); out != saved.ID.String()+"\n" {
		t.Fatalf("-q printed %q", out)
	}
}
