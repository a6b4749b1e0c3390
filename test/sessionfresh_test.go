package test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
)

// Issue 43: a host-native session whose provider thread was gone failed closed for good;
// start-fresh existed only for sandboxed hosts. With the real `codex app-server` and its
// thread store deleted: a session under the exact-resume contract (the default) fails closed
// and an operator starts it fresh with the checksum of the evidence they inspected (a wrong
// one is refused), and its waiting message is answered on a new thread; a session whose
// resume policy is fresh continues on a new thread at once. Each room is told.
func TestAHostNativeCodexWhoseThreadIsGoneFailsClosedOrStartsFreshByItsPolicy(t *testing.T) {
	t.Parallel()
	realagent.Require(t, "codex")
	model := codexModel(t)
	home, codexHome := filepath.Join(t.TempDir(), "jam-home"), t.TempDir()
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), "JAM_OWNED_RUNTIME_IDLE_SECS=2", "CODEX_HOME="+codexHome, "STUB_MODEL_KEY=x"))
	c, ctx := d.client, context.Background()
	exact := codexAgent(t, c, "exact", codexTemplate(model, nil))
	freshTmpl := codexTemplate(model, nil)
	freshTmpl.ResumePolicy = domain.ResumeFresh
	fresh := codexAgent(t, c, "fresh", freshTmpl)
	exactRoom, exactSession := roomWith(t, c, "exact-room", exact)
	freshRoom, freshSession := roomWith(t, c, "fresh-room", fresh)
	awaitReply(t, c, postText(t, c, exactRoom.ID, "first"), 2*time.Minute)
	awaitReply(t, c, postText(t, c, freshRoom.ID, "first"), 2*time.Minute)
	exactThread, freshThread := getSession(t, c, exactSession).ProviderSessionID, getSession(t, c, freshSession).ProviderSessionID
	if exactThread == "" || freshThread == "" {
		t.Fatal("no thread bound")
	}
	awaitPresence(t, c, exactSession, domain.PresenceDormant, time.Minute)
	awaitPresence(t, c, freshSession, domain.PresenceDormant, time.Minute)
	// Codex loses its threads: their rollouts are gone.
	if err := os.RemoveAll(filepath.Join(codexHome, "sessions")); err != nil {
		t.Fatal(err)
	}

	// Exact: fails closed, says so, and offers an evidence-bound start-fresh.
	waiting := postText(t, c, exactRoom.ID, "second")
	awaitEvent(t, c, exactRoom.ID, domain.EventRuntimeFailed, func(p json.RawMessage) bool {
		return strings.Contains(string(p), `"class":"exact_resume_unavailable"`)
	}, time.Minute)
	var cont api.SessionContinuityBody
	must(t, c.Do(ctx, http.MethodGet, "/v1/sessions/"+exactSession.String()+"/continuity", nil, &cont))
	if !cont.CanStartFresh || cont.ProviderSessionID != exactThread || cont.ResumePolicy != domain.ResumeExact || cont.EvidenceChecksum == "" {
		t.Fatalf("continuity %+v", cont)
	}
	_, err := c.DoRaw(ctx, http.MethodPost, "/v1/sessions/"+exactSession.String()+"/start-fresh",
		api.SessionStartFreshRequest{ConfirmStartFresh: true, EvidenceChecksum: strings.Repeat("0", 64)})
	if !isStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "evidence") {
		t.Fatalf("a start-fresh with the wrong checksum: %v, want 409 evidence changed", err)
	}
	if rs := repliesTo(t, c, waiting); len(rs) != 0 {
		t.Fatalf("answered before anyone started it fresh: %+v", rs)
	}
	cli := []string{"JAM_URL=" + d.apiURL, "JAM_HOME=" + home}
	if out, err := runJam(t, cli, "session", "start-fresh", exactSession.String(), "--checksum", cont.EvidenceChecksum, "--confirm"); err != nil {
		t.Fatalf("jam session start-fresh: %v\n%s", err, out)
	}
	if r := awaitReply(t, c, waiting, 2*time.Minute); r.Text != "stub: second" {
		t.Fatalf("reply after start-fresh %q", r.Text)
	}
	if now := getSession(t, c, exactSession); now.ProviderSessionID == "" || now.ProviderSessionID == exactThread || now.Failure != nil {
		t.Fatalf("after start-fresh: thread %q (was %q), failure %+v", now.ProviderSessionID, exactThread, now.Failure)
	}
	awaitEvent(t, c, exactRoom.ID, domain.EventThreadReplaced, func(p json.RawMessage) bool {
		return strings.Contains(string(p), exactThread) && strings.Contains(string(p), "operator started the session fresh")
	}, 10*time.Second)

	// Fresh: the room is told and answered on a new thread, with no one's say-so needed.
	next := postText(t, c, freshRoom.ID, "second")
	if r := awaitReply(t, c, next, 2*time.Minute); r.Text != "stub: second" {
		t.Fatalf("fresh policy reply %q", r.Text)
	}
	if now := getSession(t, c, freshSession); now.ProviderSessionID == "" || now.ProviderSessionID == freshThread || now.Failure != nil {
		t.Fatalf("fresh policy: thread %q (was %q), failure %+v", now.ProviderSessionID, freshThread, now.Failure)
	}
	awaitEvent(t, c, freshRoom.ID, domain.EventThreadReplaced, func(p json.RawMessage) bool {
		return strings.Contains(string(p), freshThread) && strings.Contains(string(p), "resume policy is fresh")
	}, 10*time.Second)
	if n := countEvents(t, c, freshRoom.ID, domain.EventRuntimeFailed); n != 0 {
		t.Fatalf("the fresh policy's room was told of %d failures", n)
	}
}
