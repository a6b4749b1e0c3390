package test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// watchdogEnv samples runtimes four times a second, so a crossing is seen at once.
func watchdogEnv(t *testing.T) []string {
	return ownedEnv(t, t.TempDir(), "JAM_WATCHDOG_INTERVAL_MS=250")
}

func intp(n int) *int { return &n }

// testagentWatched is a jam-testagent template under the watchdog bounds w.
func testagentWatched(t *testing.T, w domain.Watchdog) domain.TemplateConfig {
	return domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP, Command: testagent.Binary(t), Watchdog: &w}
}

// A provider that grows past its template's memory ceiling is recycled between turns: the
// room is told once (runtime_recycled, saying what was measured), the session shows the
// count and the last reason, and the room's next message is answered once, by the new
// process, on the same provider thread with the earlier turn remembered.
func TestAWatchdogRecyclesAGrowingProviderOnItsOwnThread(t *testing.T) {
	t.Parallel()
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), watchdogEnv(t))
	c := d.client
	room, session := roomWith(t, c, "leaky", codexAgent(t, c, "grower", testagentWatched(t, domain.Watchdog{MemoryMB: intp(120)})))

	grow := postText(t, c, room.ID, "[[grow 250]] hold this")
	if r := awaitReply(t, c, grow, 60*time.Second); !strings.Contains(r.Text, "holding 250 MiB") {
		t.Fatalf("the growing turn's reply: %q", r.Text)
	}
	thread := getSession(t, c, session).ProviderSessionID
	awaitEvent(t, c, room.ID, domain.EventRuntimeRecycled, func(p json.RawMessage) bool {
		return strings.Contains(string(p), `"reason":"memory"`) && strings.Contains(string(p), "over the 120 MiB ceiling")
	}, 30*time.Second)
	var s api.SessionBody
	wait.Eventually(t, 30*time.Second, func() error {
		s = getSession(t, c, session)
		if s.Recycles != 1 || s.LastRecycle == nil || s.LastRecycle.Reason != domain.RecycleMemory || s.Presence != domain.PresenceLive {
			return fmt.Errorf("recycles %d, last %+v, presence %s", s.Recycles, s.LastRecycle, s.Presence)
		}
		return nil
	}, "the session live again after one memory recycle")
	if !strings.Contains(s.LastRecycle.Measured, "resident memory") || s.ProviderSessionID != thread {
		t.Fatalf("after the recycle: measured %q, thread %q (was %q)", s.LastRecycle.Measured, s.ProviderSessionID, thread)
	}

	next := postText(t, c, room.ID, "[[count]]")
	if r := awaitReply(t, c, next, 60*time.Second); r.Text != "turns remembered: 1" {
		t.Fatalf("the new process on the same thread answered %q", r.Text)
	}
	wait.Never(t, 2*time.Second, func() bool { return len(repliesTo(t, c, next)) > 1 || len(repliesTo(t, c, grow)) > 1 },
		"a message answered twice")
	if n := countEvents(t, c, room.ID, domain.EventRuntimeRecycled); n != 1 {
		t.Fatalf("%d recycle notices, want 1", n)
	}
	if s := getSession(t, c, session); s.Recycles != 1 {
		t.Fatalf("recycled again: %d", s.Recycles)
	}
}

// A turn that goes silent past the wedge bound is interrupted (it settles nothing), the
// runtime recycled on its thread, and the message answered once, by the new process.
func TestAWedgedTurnIsInterruptedAndItsMessageAnsweredOnceAfterTheRecycle(t *testing.T) {
	t.Parallel()
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), watchdogEnv(t))
	c := d.client
	room, session := roomWith(t, c, "stuck", codexAgent(t, c, "wedger", testagentWatched(t, domain.Watchdog{WedgeSecs: intp(3)})))
	awaitReply(t, c, postText(t, c, room.ID, "hello"), 60*time.Second)
	thread := getSession(t, c, session).ProviderSessionID

	stuck := postText(t, c, room.ID, "[[wedge-once]] [[count]]")
	// The new process on the same thread remembers the first turn; the wedged one never
	// completed, so it is not among them.
	if r := awaitReply(t, c, stuck, 60*time.Second); r.Text != "turns remembered: 1" {
		t.Fatalf("the reply after the recycle: %q", r.Text)
	}
	wait.Eventually(t, 10*time.Second, func() error {
		s := getSession(t, c, session)
		if s.Recycles != 1 || s.LastRecycle == nil || s.LastRecycle.Reason != domain.RecycleWedged || s.ProviderSessionID != thread {
			return fmt.Errorf("recycles %d, last %+v, thread %q (was %q)", s.Recycles, s.LastRecycle, s.ProviderSessionID, thread)
		}
		return nil
	}, "one wedge recycle on the same thread")
	wait.Never(t, 2*time.Second, func() bool { return len(repliesTo(t, c, stuck)) > 1 }, "the wedged message answered twice")
	if n := countEvents(t, c, room.ID, domain.EventRuntimeRecycled); n != 1 {
		t.Fatalf("%d recycle notices, want 1", n)
	}
}

// A turn that goes silent past the wedge bound is interrupted and the runtime recycled; a
// provider that wedges on the same message every time is recycled three times within the
// loop window and then held failed (recycle_loop), not restarted forever. The message stays
// unanswered and queued, and `jam session show` says what was measured.
func TestAProviderThatKeepsWedgingEndsFailedNotLooping(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, watchdogEnv(t))
	c := d.client
	room, session := roomWith(t, c, "stuck", codexAgent(t, c, "wedger", testagentWatched(t, domain.Watchdog{WedgeSecs: intp(3)})))
	stuck := postText(t, c, room.ID, "[[wedge]] are you there")
	awaitEvent(t, c, room.ID, domain.EventRuntimeFailed, func(p json.RawMessage) bool {
		return strings.Contains(string(p), `"class":"recycle_loop"`)
	}, 90*time.Second)
	s := getSession(t, c, session)
	if s.Presence != domain.PresenceFailed || s.Failure == nil || s.Failure.Class != domain.FailureRecycleLoop ||
		s.Recycles != domain.RecycleLoopCount || s.LastRecycle == nil || s.LastRecycle.Reason != domain.RecycleWedged {
		t.Fatalf("after the loop: presence %s failure %+v recycles %d last %+v", s.Presence, s.Failure, s.Recycles, s.LastRecycle)
	}
	if n := countEvents(t, c, room.ID, domain.EventRuntimeRecycled); n != domain.RecycleLoopCount {
		t.Fatalf("%d recycle notices, want %d", n, domain.RecycleLoopCount)
	}
	if rs := repliesTo(t, c, stuck); len(rs) != 0 {
		t.Fatalf("a wedged turn settled: %+v", rs)
	}
	// Held: no fourth start.
	wait.Never(t, 3*time.Second, func() bool { return getSession(t, c, session).Recycles > domain.RecycleLoopCount },
		"a held session recycled again")
	out, err := runJam(t, []string{"JAM_URL=" + d.apiURL, "JAM_HOME=" + home}, "session", "show", session.String())
	if err != nil || !strings.Contains(out, `"recycles": 3`) || !strings.Contains(out, "no provider event for") {
		t.Fatalf("jam session show: %v\n%s", err, out)
	}
}

// The real codex app-server, under a memory ceiling it is always over (1 MiB): the turn it is
// running ends first, then it is recycled; the next message is answered once, by a new
// app-server on the same Codex thread that remembers the earlier turn; and, crossing again at
// every start, it is held failed after the third recycle instead of restarted forever.
func TestTheRealCodexOverItsMemoryCeilingIsRecycledOnItsThreadThenHeld(t *testing.T) {
	t.Parallel()
	realagent.Require(t, "codex")
	model := codexModel(t)
	env := ownedEnv(t, t.TempDir(), "JAM_WATCHDOG_INTERVAL_MS=1000", "CODEX_HOME="+t.TempDir(), "STUB_MODEL_KEY=x")
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), env)
	c := d.client
	tmpl := codexTemplate(model, nil)
	tmpl.Watchdog = &domain.Watchdog{MemoryMB: intp(1)}
	room, session := roomWith(t, c, "leaky", codexAgent(t, c, "codex", tmpl))

	first := postText(t, c, room.ID, "remember the number 42")
	if r := awaitReply(t, c, first, 2*time.Minute); r.Text != "stub: remember the number 42" {
		t.Fatalf("the first reply: %q", r.Text)
	}
	thread := getSession(t, c, session).ProviderSessionID
	before := len(model.Requests())
	next := postText(t, c, room.ID, "what was the number?")
	if r := awaitReply(t, c, next, 2*time.Minute); r.Text != "stub: what was the number?" {
		t.Fatalf("the reply after the recycle: %q", r.Text)
	}
	remembered := false
	for _, req := range model.Requests()[before:] {
		if strings.Contains(req.LastUser(), "what was the number?") {
			remembered = strings.Contains(req.AllText(), "remember the number 42")
			break
		}
	}
	if !remembered {
		t.Fatal("the recycled app-server's request for the next message does not hold the earlier turn")
	}
	awaitEvent(t, c, room.ID, domain.EventRuntimeFailed, func(p json.RawMessage) bool {
		return strings.Contains(string(p), `"class":"recycle_loop"`)
	}, 2*time.Minute)
	s := getSession(t, c, session)
	if s.ProviderSessionID != thread || s.Recycles != domain.RecycleLoopCount || s.LastRecycle == nil ||
		s.LastRecycle.Reason != domain.RecycleMemory || !strings.Contains(s.LastRecycle.Measured, "over the 1 MiB ceiling") {
		t.Fatalf("after the loop: thread %q (was %q), recycles %d, last %+v", s.ProviderSessionID, thread, s.Recycles, s.LastRecycle)
	}
	for _, m := range []api.MessageBody{first, next} {
		if rs := repliesTo(t, c, m); len(rs) != 1 {
			t.Fatalf("%q answered %d times", m.Text, len(rs))
		}
	}
}
