package test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// Issue 43, through jam dev and the public API with the fake sbx: the checkpoint of a
// sandboxed room's teardown fails (its host's checkpoints directory cannot take the
// generation). The host parks fenced: the host shows why, its workflow's stage is fenced
// (jam ops), a host restart is refused with the reason and the room's restart does not
// start a runtime over the unsaved state. Once the disk takes it again, a manual checkpoint
// succeeds, the fence lifts, and the room restarts and answers from the same provider
// session.
func TestAFailedTeardownCheckpointFencesTheHostUntilItSucceeds(t *testing.T) {
	t.Parallel()
	e := startSandboxDev(t)
	c, ctx := e.d.client, context.Background()
	agent := sandboxedAgent(t, c, "fenced", domain.PlacementDedicated)
	room, session := roomWith(t, c, "lab", agent)
	awaitReply(t, c, postText(t, c, room.ID, "[[count]] before"), 60*time.Second)
	host := hostsOf(t, c, agent)[0].ID
	blockCheckpoints(t, e.home, host)

	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/stop", nil, nil))
	var h api.HostBody
	wait.Eventually(t, 60*time.Second, func() error {
		must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+host.String(), nil, &h))
		if h.State != domain.HostParked || h.Lease == nil || h.Lease.Unsaved == nil {
			return fmt.Errorf("host %s lease %+v", h.State, h.Lease)
		}
		return nil
	}, "the host parked, fenced")
	if u := h.Lease.Unsaved; u.Reason != domain.CheckpointBeforeStop || !strings.Contains(u.Error, "not a directory") {
		t.Fatalf("unsaved %+v", u)
	}
	cli := []string{"JAM_URL=" + e.d.apiURL, "JAM_HOME=" + e.home}
	wait.Eventually(t, 30*time.Second, func() error {
		out, err := runJam(t, cli, "ops", "find", host.String(), "--kind", "RuntimeHost")
		if err != nil || !strings.Contains(out, string(domain.StageFenced)) {
			return fmt.Errorf("jam ops find: %v\n%s", err, out)
		}
		return nil
	}, "jam ops to show the host's stage fenced")

	// A host restart is refused, saying why.
	_, err := c.DoRaw(ctx, http.MethodPost, "/v1/hosts/"+host.String()+"/control", api.HostControlRequest{Action: domain.HostRestart})
	if !isStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "checkpoint") {
		t.Fatalf("a restart of the fenced host: %v, want 409 naming the failed checkpoint", err)
	}
	// The room's restart starts nothing over the unsaved state; its message waits.
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/restart", nil, nil))
	waiting := postText(t, c, room.ID, "[[count]] after")
	wait.Eventually(t, 30*time.Second, func() error {
		s := getSession(t, c, session)
		if s.Runtime == nil || !strings.Contains(s.Runtime.LastError, "checkpoint") || s.Presence == domain.PresenceLive {
			return fmt.Errorf("session %s %+v", s.Presence, s.Runtime)
		}
		return nil
	}, "the room to say the fenced host refused it")
	if rs := repliesTo(t, c, waiting); len(rs) != 0 {
		t.Fatalf("answered over unsaved state: %+v", rs)
	}

	// The disk takes the generation again: a manual checkpoint succeeds and lifts the fence.
	unblockCheckpoints(t, e.home, host)
	if out, err := runJam(t, cli, "host", "checkpoint", host.String()); err != nil {
		t.Fatalf("jam host checkpoint: %v\n%s", err, out)
	}
	var after api.HostBody // fresh: decoding into h would keep its old unsaved
	must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+host.String(), nil, &after))
	if after.Lease == nil || after.Lease.Unsaved != nil {
		t.Fatalf("after the checkpoint: lease %+v unsaved %+v", after.Lease, after.Lease.Unsaved)
	}
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/restart", nil, nil))
	if r := awaitReply(t, c, waiting, 60*time.Second); !strings.Contains(r.Text, "turns remembered: 1") {
		t.Fatalf("reply after the fence lifted %q: not the same provider session", r.Text)
	}
}
