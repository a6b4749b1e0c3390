package main

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
)

// `jam session stop` says the session is held until a restart; `restart` says it is
// starting again, not "dormant (dormant)" for both.
func TestSessionStopAndRestartSayWhatHappened(t *testing.T) {
	id := uuid.New()
	var f fakeAPI
	url := f.serve(t, api.SessionBody{RuntimeSessionID: id, Presence: domain.PresenceDormant, Phase: domain.PhaseDormant,
		Runtime: &api.RuntimeBody{Held: true}, Config: domain.TemplateConfig{Transport: domain.TransportACP}})
	out := runCLI(t, "session", "stop", id.String(), "--url", url, "--token", "tok")
	if want := "stopped session " + id.String() + ": held dormant until jam session restart " + id.String(); !strings.HasPrefix(out, want) {
		t.Fatalf("stop printed %q, want %q", out, want)
	}
	if f.path != "/v1/sessions/"+id.String()+"/stop" {
		t.Fatalf("sent %+v", f)
	}
	if out := runCLI(t, "session", "stop", id.String(), "-q", "--url", url, "--token", "tok"); out != id.String()+"\n" {
		t.Fatalf("stop -q printed %q", out)
	}

	var g fakeAPI
	url = g.serve(t, api.SessionBody{RuntimeSessionID: id, Presence: domain.PresenceDormant, Phase: domain.PhaseDormant,
		Runtime: &api.RuntimeBody{}, Config: domain.TemplateConfig{Transport: domain.TransportACP}})
	out = runCLI(t, "session", "restart", id.String(), "--url", url, "--token", "tok")
	if want := "restarted session " + id.String() + ": dormant, starting again now"; !strings.HasPrefix(out, want) {
		t.Fatalf("restart printed %q, want %q", out, want)
	}

	failed := api.SessionBody{RuntimeSessionID: id, Presence: domain.PresenceFailed, Phase: domain.PhaseFailed,
		Failure: &domain.RuntimeFailure{Class: domain.FailureAdapterMissing, Reason: "no node runs acp"}}
	if got := controlOutcome("restart", failed); !strings.Contains(got, "failed, adapter_missing: no node runs acp") {
		t.Fatalf("failed restart: %q", got)
	}
}

// The session commands speak of runtime sessions, as the README does.
func TestSessionHelpSaysRuntimeSessions(t *testing.T) {
	cmd := newSessionCmd(nil)
	if !strings.HasPrefix(cmd.Short, "Runtime sessions") || strings.Contains(strings.ToLower(cmd.Short+cmd.Long), "host session") {
		t.Fatalf("session help: %q %q", cmd.Short, cmd.Long)
	}
	for _, c := range cmd.Commands() {
		if strings.Contains(strings.ToLower(c.Short), "host session") {
			t.Fatalf("jam session %s: %q", c.Name(), c.Short)
		}
	}
}
