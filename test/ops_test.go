package test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// An operator finds a room's workflows by its name, sees a workspace operation blocked on a
// failing activity (the activity, its attempts, its last failure), removes the cause and
// resets the operation with `jam ops retry`, which then completes; terminating a room's
// session is refused without --force; a session is poked by hand; the Reconcile schedule's
// status is shown. Every answer names the Temporal CLI command that does the same.
func TestAnOperatorRetriesAWorkflowBlockedOnAFailingActivity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	faults := t.TempDir()
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), "JAM_SBX="+fakesbx.Binary(t), "FAKESBX_STATE="+t.TempDir(),
		"FAKESBX_LOG="+filepath.Join(t.TempDir(), "sbx.log"), "TEST_GUEST_VALUE=x",
		"JAM_FAULT_FAIL=export.create", "JAM_FAULT_DIR="+faults))
	c := d.client
	cli := []string{"JAM_URL=" + d.apiURL, "JAM_HOME=" + home}
	ops := func(args ...string) string {
		t.Helper()
		out, err := runJam(t, cli, append([]string{"ops"}, args...)...)
		if err != nil {
			t.Fatalf("jam ops %v: %v\n%s", args, err, out)
		}
		return out
	}

	agent := sandboxedAgent(t, c, "keeper", domain.PlacementDedicated)
	room, session := roomWith(t, c, "ops-lab", agent)
	awaitReply(t, c, postText(t, c, room.ID, "hello"), time.Minute)

	// Found by the room's name, with stage and the Temporal CLI equivalent.
	wait.Eventually(t, 30*time.Second, func() bool {
		out := ops("find", "ops-lab")
		return strings.Contains(out, contract.RoomSessionID(session)) && strings.Contains(out, "live") &&
			strings.Contains(out, "temporal workflow list")
	}, "jam ops find to list the room's session")

	// An export whose activity keeps failing.
	if err := os.WriteFile(filepath.Join(faults, "export.create.fail"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var started api.OperationResource
	must(t, c.Do(ctx, http.MethodPost, "/v1/workspaces/"+session.String()+"/export", api.WorkspaceOpRequest{}, &started))
	op := contract.WorkspaceOpID(session)
	var described string
	wait.Eventually(t, time.Minute, func() bool {
		described = ops("describe", op)
		return strings.Contains(described, "CreateExport") && strings.Contains(described, "fault injected at export.create") &&
			!strings.Contains(described, "1 of unlimited")
	}, "jam ops describe to show the failing activity retried")
	if !strings.Contains(described, "temporal workflow describe") || !strings.Contains(described, "stage exporting") {
		t.Fatalf("describe:\n%s", described)
	}
	if got := ops("find", session.String(), "--kind", contract.TypeWorkspaceOp); !strings.Contains(got, op) {
		t.Fatalf("find by workspace:\n%s", got)
	}

	// The cause removed, a retry resets the operation and it completes.
	if err := os.Remove(filepath.Join(faults, "export.create.fail")); err != nil {
		t.Fatal(err)
	}
	if out := ops("retry", op, "--reason", "export fault removed"); !strings.Contains(out, "temporal workflow reset") {
		t.Fatalf("retry:\n%s", out)
	}
	wait.Eventually(t, 20*time.Second, func() bool {
		ws := getWorkspace(t, c, session)
		return len(ws.Operations) > 0 && ws.Operations[0].State == domain.OpSucceeded
	}, "the export to succeed after the retry")

	// Entity workflows are not terminated by accident.
	out, err := runJam(t, cli, "ops", "terminate", contract.RoomSessionID(session), "--reason", "testing")
	if err == nil || !strings.Contains(err.Error(), "force") {
		t.Fatalf("terminate without --force: %v\n%s", err, out)
	}
	if out := ops("signal", session.String(), "inbound"); !strings.Contains(out, "temporal workflow signal") {
		t.Fatalf("signal:\n%s", out)
	}
	// A room whose first message's poke was lost has no workflow yet: the same poke starts it.
	_, quiet := roomWith(t, c, "ops-quiet", agent)
	if out := ops("signal", quiet.String(), "inbound"); !strings.Contains(out, "temporal workflow signal") {
		t.Fatalf("signal of a never-started session:\n%s", out)
	}
	awaitPresence(t, c, quiet, domain.PresenceDormant, 30*time.Second)
	tc := temporaltest.Dial(t, d.temporal)
	if _, err := tc.DescribeWorkflowExecution(ctx, contract.RoomSessionID(quiet), ""); err != nil {
		t.Fatalf("the poke did not start the session's workflow: %v", err)
	}
	if out := ops("reconcile", "status"); !strings.Contains(out, "schedule Reconcile") || !strings.Contains(out, "temporal schedule describe") {
		t.Fatalf("reconcile status:\n%s", out)
	}
}
