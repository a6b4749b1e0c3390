package permission

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/provider/acp"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testagent.Cleanup()
	os.Exit(code)
}

// TestTheRealAgentWaitsForAnOperatorDecision runs the real jam-testagent through the ACP
// adapter with this broker: its session/request_permission becomes a pending request, an
// operator decides it from another connection (as the API server would), and the turn
// continues with the decision; allow_always then answers the next request from the rule.
func TestTheRealAgentWaitsForAnOperatorDecision(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		rt, err := acp.New(provider.Spec{RuntimeSession: uuid.New(), Generation: 1, AgentID: f.agent.ID, RoomID: f.room.ID,
			Transport: domain.TransportACP, Executable: testagent.Binary(t), Args: []string{"--state-dir", t.TempDir()},
			Env: os.Environ(), Dir: t.TempDir(), Permissions: f.broker})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := rt.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		defer rt.Teardown(context.Background(), domain.CheckpointBeforeStop)

		turn := func() chan provider.TurnResult {
			out := make(chan provider.TurnResult, 1)
			go func() {
				res, err := rt.RunTurn(ctx, provider.Turn{ID: uuid.NewString(), Messages: []provider.Message{{
					ID: uuid.New(), AuthorKind: domain.ParticipantHuman, AuthorName: "ada", Text: "[[permission execute]]"}}})
				if err != nil {
					t.Error(err)
				}
				out <- res
			}()
			return out
		}
		done := turn()
		var pending domain.Permission
		wait.Eventually(t, 20*time.Second, func() bool {
			state := domain.PermissionPending
			ps, err := f.other.ListPermissions(ctx, store.PermissionFilter{State: &state, Agent: &f.agent.ID})
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) > 0 {
				pending = ps[0]
			}
			return pending.ID != uuid.Nil
		}, "a pending permission request")
		if pending.ToolKey != "execute" || pending.RoomID == nil || *pending.RoomID != f.room.ID {
			t.Fatalf("pending request %+v", pending)
		}
		if _, err := f.other.DecidePermission(ctx, pending.ID, domain.PermissionAllowAlways, "operator", "", time.Now()); err != nil {
			t.Fatal(err)
		}
		res := <-done
		if res.Outcome != domain.TurnComplete || res.Plan.Settles[0].Text != "permission granted" {
			t.Fatalf("turn after the decision: %+v", res)
		}
		// The always-rule answers the next request without asking anyone.
		res = <-turn()
		if res.Plan.Settles[0].Text != "permission granted" {
			t.Fatalf("turn under the always-rule: %+v", res)
		}
		all, _ := f.store.ListPermissions(ctx, store.PermissionFilter{Agent: &f.agent.ID})
		if len(all) != 1 {
			t.Fatalf("%d stored requests, want only the first", len(all))
		}
	})
}
