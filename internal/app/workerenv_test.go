package app

import (
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/permission"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/questions"
	"github.com/jam-dev/jam/internal/sandbox"
)

func TestTheWorkerConfigurationIsParsedFromTheSnapshot(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	agentVar := provider.EnvVarFor("jam-testagent")
	environ := []string{"PATH=/usr/bin:/bin", "JAM_SBX=/opt/sbx", "JAM_OWNED_RUNTIME_IDLE_SECS=7",
		permission.EnvTimeout + "=9", questions.EnvTimeout + "=120", agentVar + "=/opt/agent"}
	we, err := parseWorkerEnv(environ, "", log)
	if err != nil {
		t.Fatal(err)
	}
	if we.sbx != (sandbox.Config{Sbx: "/opt/sbx", PATH: "/usr/bin:/bin"}) {
		t.Errorf("sbx %+v", we.sbx)
	}
	if we.lifecycle.IdleSecs != 7 {
		t.Errorf("lifecycle %+v", we.lifecycle)
	}
	if we.permission != (permission.TimeoutOverride{Set: true, Timeout: 9 * time.Second}) {
		t.Errorf("permission %+v", we.permission)
	}
	if we.question != (questions.TimeoutOverride{Set: true, Timeout: 2 * time.Minute}) {
		t.Errorf("question %+v", we.question)
	}
	if we.pause != nil {
		t.Error("fault hook without JAM_FAULT_PAUSE")
	}
	// The operator's default provider is kept, not replaced by a bundled one.
	if got := envLookup(we.env)(agentVar); got != "/opt/agent" {
		t.Errorf("%s=%q", agentVar, got)
	}

	// --sbx wins over JAM_SBX.
	if we, err = parseWorkerEnv(environ, "/flag/sbx", log); err != nil || we.sbx.Sbx != "/flag/sbx" {
		t.Errorf("sbx %+v, %v", we.sbx, err)
	}
	// A malformed lifecycle knob stops the worker; a malformed permission timeout is
	// ignored, as the broker always did.
	if _, err := parseWorkerEnv([]string{"JAM_OWNED_RUNTIME_LAZY=maybe"}, "", log); err == nil {
		t.Error("malformed JAM_OWNED_RUNTIME_LAZY accepted")
	}
	if we, err = parseWorkerEnv([]string{permission.EnvTimeout + "=soon"}, "", log); err != nil || we.permission.Set {
		t.Errorf("permission %+v, %v", we.permission, err)
	}
	// A malformed question timeout stops the worker, naming the variable; unset is no
	// override.
	for _, bad := range []string{"soon", "-1", strconv.Itoa(domain.MaxQuestionTimeoutSecs + 1)} {
		if _, err := parseWorkerEnv([]string{questions.EnvTimeout + "=" + bad}, "", log); err == nil || !strings.Contains(err.Error(), questions.EnvTimeout) {
			t.Errorf("%s=%s: %v", questions.EnvTimeout, bad, err)
		}
	}
	if we, err = parseWorkerEnv(nil, "", log); err != nil || we.question.Set || we.questionInline != questions.DefaultInline {
		t.Errorf("unset question timeout and inline wait: %+v %s, %v", we.question, we.questionInline, err)
	}
	// The inline wait: whole seconds (0: until the deadline), else the worker stops.
	if we, err = parseWorkerEnv([]string{questions.EnvInline + "=0"}, "", log); err != nil || we.questionInline != 0 {
		t.Errorf("inline 0: %s, %v", we.questionInline, err)
	}
	if _, err := parseWorkerEnv([]string{questions.EnvInline + "=soon"}, "", log); err == nil || !strings.Contains(err.Error(), questions.EnvInline) {
		t.Errorf("%s=soon: %v", questions.EnvInline, err)
	}
	if we, err = parseWorkerEnv([]string{"JAM_FAULT_PAUSE=p", "JAM_FAULT_DIR=" + t.TempDir()}, "", log); err != nil || we.pause == nil {
		t.Errorf("no fault hook: %v", err)
	}
	// The workflow cache: unset is the default (0), a count is kept, anything else stops the
	// worker naming the variable.
	if we, err = parseWorkerEnv([]string{envWorkflowCache + "=250"}, "", log); err != nil || we.workflowCache != 250 {
		t.Errorf("workflow cache %d, %v", we.workflowCache, err)
	}
	for _, bad := range []string{"many", "0", "-5"} {
		if _, err := parseWorkerEnv([]string{envWorkflowCache + "=" + bad}, "", log); err == nil || !strings.Contains(err.Error(), envWorkflowCache) {
			t.Errorf("%s=%s: %v", envWorkflowCache, bad, err)
		}
	}
}

// JAM_WORKER_PROVIDERS limits a node's adapters to the families it names; unset is all of
// them, and a family without an adapter stops the worker with the ones it could name.
func TestTheWorkerRunsOnlyTheProvidersItIsGiven(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	we, err := parseWorkerEnv([]string{"JAM_WORKER_PROVIDERS=acp, codex"}, "", log)
	if err != nil {
		t.Fatal(err)
	}
	if len(we.factories) != 2 || we.factories[domain.ProviderACP] == nil || we.factories[domain.ProviderCodex] == nil {
		t.Errorf("factories %v", we.factories)
	}
	if we, err = parseWorkerEnv(nil, "", log); err != nil || we.factories != nil {
		t.Errorf("unset: %v, %v", we.factories, err)
	}
	_, err = parseWorkerEnv([]string{"JAM_WORKER_PROVIDERS=acp,pull"}, "", log)
	if err == nil || !strings.Contains(err.Error(), "JAM_WORKER_PROVIDERS") || !strings.Contains(err.Error(), "copilot") {
		t.Errorf("a family without an adapter: %v", err)
	}
}

// Every worker, jam dev's too, resolves its provider CLIs at start unless
// JAM_WORKER_PROBE_CLIS=0 says not to; anything else there stops it, naming the variable.
func TestTheStartCLIProbeIsOnUnlessTurnedOff(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for env, want := range map[string]bool{"": true, "1": true, "true": true, "0": false, "false": false} {
		we, err := parseWorkerEnv([]string{envProbeCLIs + "=" + env}, "", log)
		if err != nil || we.probeCLIs != want {
			t.Errorf("%s=%q: probe %v, %v; want %v", envProbeCLIs, env, we.probeCLIs, err, want)
		}
	}
	if _, err := parseWorkerEnv([]string{envProbeCLIs + "=later"}, "", log); err == nil || !strings.Contains(err.Error(), envProbeCLIs) {
		t.Errorf("a malformed %s: %v", envProbeCLIs, err)
	}
}
