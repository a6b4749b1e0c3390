package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// The durable membership is what host controls take their scope from: it lists every member
// (a session whose host-session row is gone too, so the control can refuse), and membership
// and host state move only as the lifecycle allows.
func TestHostMembershipIsDurableAndItsStatesAreGuarded(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		one, orphan := newSession(t, s, a), newSession(t, s, a)
		mustExec(t, s, `INSERT INTO host_sessions (runtime_session_id, agent_id, template_id, alias, room_id, config,
desired_generation, effective_generation, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 1, 0, ?, ?)`,
			one, a.agent, a.template, "default-x", uuid.New(),
			`{"alias":"default","transport":"cursor-acp","placement":"shared_agent_host","sandbox":{"enabled":true,"workspace_source":"managed"}}`,
			fixtureTime, fixtureTime)
		alloc, err := s.AllocateHost(ctx, allocReq(a, one, domain.PlacementShared, "fp"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AllocateHost(ctx, allocReq(a, orphan, domain.PlacementShared, "fp")); err != nil {
			t.Fatal(err)
		}
		host := alloc.Host.ID
		members, err := s.HostMembers(ctx, host)
		if err != nil || len(members) != 2 {
			t.Fatalf("members %+v %v", members, err)
		}
		if m := members[0]; m.RuntimeSession != one || m.AgentID != a.agent || m.Placement != domain.PlacementShared ||
			m.Workspace != domain.WorkspaceManaged || m.State != domain.MembershipDormant {
			t.Fatalf("member %+v", m)
		}
		if members[1].AgentID != uuid.Nil {
			t.Fatalf("a member without a session row resolved: %+v", members[1])
		}
		now := time.Now()
		if err := s.SetMembershipState(ctx, one, domain.MembershipActive, now); err != nil {
			t.Fatal(err)
		}
		if err := s.SetMembershipState(ctx, uuid.New(), domain.MembershipActive, now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("membership of a host-native session: %v", err)
		}
		if got, err := s.HostOfSession(ctx, one); err != nil || got.ID != host {
			t.Fatalf("host of session %+v %v", got, err)
		}
		if err := s.SetHostState(ctx, host, domain.HostParked, now); err != nil {
			t.Fatal(err)
		}
		var ve *domain.ValidationError
		if err := s.SetHostState(ctx, host, domain.HostRemoved, now); !errors.As(err, &ve) {
			t.Fatalf("removed through the lifecycle: %v", err)
		}
		mustExec(t, s, `UPDATE runtime_hosts SET state = ? WHERE id = ?`, domain.HostArchived, host)
		if err := s.SetHostState(ctx, host, domain.HostActive, now); !errors.Is(err, ErrConflict) {
			t.Fatalf("an archived host came back: %v", err)
		}
		if err := s.SetHostState(ctx, uuid.New(), domain.HostActive, now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown host: %v", err)
		}
		hosts, err := s.ListRuntimeHosts(ctx, &a.agent)
		if err != nil || len(hosts) != 1 || hosts[0].ID != host {
			t.Fatalf("hosts %+v %v", hosts, err)
		}
		// The managed workspace record is idempotent under its session id.
		for _, st := range []domain.WorkspaceState{domain.WorkspaceReady, domain.WorkspaceNeedsReconciliation} {
			if err := s.RecordManagedWorkspace(ctx, host, one, domain.WorkspaceManaged, "", st, now); err != nil {
				t.Fatal(err)
			}
		}
		var state string
		if err := s.get(ctx, &state, `SELECT state FROM managed_workspaces WHERE id = ?`, one); err != nil || state != string(domain.WorkspaceNeedsReconciliation) {
			t.Fatalf("workspace state %q %v", state, err)
		}
	})
}
