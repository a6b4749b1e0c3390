package test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// Issue 43: an owned Codex or Copilot agent whose template names a model-provider key
// variable the node does not set was retried forever, silently (20 prepares in 3.5 min, the
// room told nothing). With the real CLIs through jam dev: each session is held failed
// (credential_missing) after one prepare, its room told once, and no further start comes
// while Reconcile runs every 2 s; jam dev restarted on the same home with the variable set
// answers each queued message once. (The templates are saved while the node has the
// variable: a save naming one no live node sets is refused.)
func TestAnUnsetKeyVariableFailsOnceAndARestartedNodeAnswers(t *testing.T) {
	t.Parallel()
	realagent.Require(t, "codex")
	realagent.Require(t, "copilot")
	model := codexModel(t)
	home := filepath.Join(t.TempDir(), "jam-home")
	state, codexHome, copilot := t.TempDir(), t.TempDir(), copilotHome(t)
	env := func(extra ...string) []string {
		return ownedEnv(t, state, append([]string{"JAM_RECONCILE_INTERVAL_SECS=2", "CODEX_HOME=" + codexHome,
			"COPILOT_HOME=" + copilot}, extra...)...)
	}
	// The templates are saved while the node sets the variable (a save naming a variable no
	// live node sets is refused); the node then restarts without it.
	d := startDevEnv(t, home, env("STUB_MODEL_KEY=x"))
	c := d.client
	type room struct {
		name          string
		room, session uuid.UUID
		msg           api.MessageBody
		tmpl          domain.TemplateConfig
	}
	rooms := []*room{{name: "codex", tmpl: codexTemplate(model, nil)}, {name: "copilot", tmpl: copilotTemplate(model)}}
	for _, r := range rooms {
		agent := codexAgent(t, c, r.name, r.tmpl)
		rb, session := roomWith(t, c, r.name+"-room", agent)
		r.room, r.session = rb.ID, session
	}
	d.stop(t)
	d = startDevEnv(t, home, env()) // STUB_MODEL_KEY is not set on the node
	c = d.client
	for _, r := range rooms {
		r.msg = postText(t, c, r.room, "are you there, "+r.name+"?")
	}
	for _, r := range rooms {
		awaitEvent(t, c, r.room, domain.EventRuntimeFailed, func(p json.RawMessage) bool {
			return strings.Contains(string(p), `"class":"credential_missing"`) && strings.Contains(string(p), "STUB_MODEL_KEY")
		}, 60*time.Second)
		s := getSession(t, c, r.session)
		if s.Presence != domain.PresenceFailed || s.Failure == nil || s.Failure.Class != domain.FailureCredentialMissing ||
			!strings.Contains(s.Failure.Reason, "restart the node") {
			t.Fatalf("%s session: presence %s failure %+v", r.name, s.Presence, s.Failure)
		}
	}
	// Reconcile runs every 2 s all along: nothing starts again, nothing more is said.
	tc := temporaltest.Dial(t, d.temporal)
	prepares := func(session uuid.UUID) int {
		return countHistory(t, tc, session, func(e *historypb.HistoryEvent) bool {
			return e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED &&
				e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "PrepareRuntime"
		})
	}
	wait.Never(t, 6*time.Second, func() bool {
		for _, r := range rooms {
			if prepares(r.session) > 1 {
				return true
			}
		}
		return false
	}, "a second prepare of a session whose key variable is unset")
	for _, r := range rooms {
		if n := countEvents(t, c, r.room, domain.EventRuntimeFailed); n != 1 {
			t.Fatalf("%s room told %d times", r.name, n)
		}
		if rs := repliesTo(t, c, r.msg); len(rs) != 0 {
			t.Fatalf("%s answered without its key: %+v", r.name, rs)
		}
	}

	// The operator sets the variable and restarts the node: each message is answered once.
	d.stop(t)
	d = startDevEnv(t, home, env("STUB_MODEL_KEY=x"))
	c = d.client
	for _, r := range rooms {
		reply := awaitReply(t, c, r.msg, 2*time.Minute)
		if !strings.Contains(reply.Text, "are you there, "+r.name) {
			t.Fatalf("%s reply %q", r.name, reply.Text)
		}
	}
	for _, r := range rooms {
		wait.Never(t, time.Second, func() bool { return len(repliesTo(t, c, r.msg)) != 1 }, fmt.Sprintf("%s answered twice", r.name))
		if s := getSession(t, c, r.session); s.Failure != nil {
			t.Fatalf("%s still failed: %+v", r.name, s.Failure)
		}
	}
}
