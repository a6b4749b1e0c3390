package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/testdb"
	"github.com/jam-dev/jam/schema"
)

// The conformance suite: every test here runs unchanged against SQLite and Postgres.

func openTest(t testing.TB, url string) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s
}

func forEachStore(t *testing.T, fn func(t *testing.T, s *Store)) {
	testdb.ForEachURL(t, func(t *testing.T, url string) { fn(t, openTest(t, url)) })
}

func TestMigrationsGoDownAndUpAgain(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		v, err := schema.CurrentVersion(ctx, s.Dialect(), s.DB())
		if err != nil {
			t.Fatal(err)
		}
		if v.Version != v.Latest || v.Dirty || v.Latest == 0 {
			t.Fatalf("after up: %+v, want clean latest", v)
		}
		if err := schema.Force(ctx, s.Dialect(), s.DB(), v.Latest); err != nil {
			t.Fatal(err)
		}
		if v, err = schema.CurrentVersion(ctx, s.Dialect(), s.DB()); err != nil || v.Version != v.Latest || v.Dirty {
			t.Fatalf("after force: %+v, %v", v, err)
		}
		if err := schema.Down(ctx, s.Dialect(), s.DB(), 0); err != nil {
			t.Fatal(err)
		}
		if v, err = schema.CurrentVersion(ctx, s.Dialect(), s.DB()); err != nil || v.Version != 0 {
			t.Fatalf("after down: %+v, %v", v, err)
		}
		if _, err := s.ListNodes(ctx); err == nil {
			t.Fatal("nodes table survived migrate down")
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ListNodes(ctx); err != nil {
			t.Fatalf("nodes after up again: %v", err)
		}
	})
}

// The schema spells enumeration values in CHECK constraints; this keeps them equal to the
// domain tables, which are the one source of wire names.
func TestSchemaChecksAcceptExactlyTheDomainEnums(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		ws := newWorkspace(t, s)

		type column struct {
			name   string
			values []string
			insert func(v string) error
		}
		columns := []column{
			{"agents.kind", domain.AgentKinds.Strings(), func(v string) error {
				_, err := s.exec(ctx, `INSERT INTO agents (id, name, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
					uuid.New(), uuid.NewString(), v, fixtureTime, fixtureTime)
				return err
			}},
			{"runtime_hosts.placement", domain.Placements.Strings(), func(v string) error {
				_, err := s.exec(ctx, `
INSERT INTO runtime_hosts (id, agent_id, template_id, placement, state, node, sandboxed, compatibility, created_at, updated_at)
VALUES (?, ?, ?, ?, 'archived', 'n', ?, 'fp', ?, ?)`, uuid.New(), a.agent, a.template, v, false, fixtureTime, fixtureTime)
				return err
			}},
			{"runtime_hosts.state", domain.RuntimeHostStates.Strings(), func(v string) error {
				return insertHost(s, a, uuid.New(), domain.PlacementDedicated, domain.RuntimeHostState(v))
			}},
			{"runtime_host_sessions.state", domain.MembershipStates.Strings(), func(v string) error {
				host := newHost(t, s, a, domain.PlacementDedicated)
				_, err := s.exec(ctx, `INSERT INTO runtime_host_sessions (runtime_session_id, runtime_host_id, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
					newSession(t, s, a), host, v, fixtureTime, fixtureTime)
				return err
			}},
			{"managed_workspaces.source", domain.WorkspaceSources.Strings(), func(v string) error {
				_, err := s.exec(ctx, `INSERT INTO managed_workspaces (id, runtime_host_id, runtime_session_id, source, state, created_at, updated_at) VALUES (?, ?, ?, ?, 'ready', ?, ?)`,
					uuid.New(), ws.host, newSession(t, s, a), v, fixtureTime, fixtureTime)
				return err
			}},
			{"managed_workspaces.state", domain.WorkspaceStates.Strings(), func(v string) error {
				_, err := s.exec(ctx, `INSERT INTO managed_workspaces (id, runtime_host_id, runtime_session_id, source, state, created_at, updated_at) VALUES (?, ?, ?, 'managed', ?, ?, ?)`,
					uuid.New(), ws.host, newSession(t, s, a), v, fixtureTime, fixtureTime)
				return err
			}},
			{"workspace_operations.kind", domain.WorkspaceOpKinds.Strings(), func(v string) error {
				_, err := s.exec(ctx, `INSERT INTO workspace_operations (id, workspace_id, runtime_host_id, runtime_session_id, kind, state, started_at, updated_at) VALUES (?, ?, ?, ?, ?, 'succeeded', ?, ?)`,
					uuid.New(), ws.workspace, ws.host, ws.session, v, fixtureTime, fixtureTime)
				return err
			}},
			{"workspace_operations.state", domain.WorkspaceOpStates.Strings(), func(v string) error {
				// A fresh workspace each time: at most one running operation per workspace.
				w := newWorkspace(t, s)
				_, err := s.exec(ctx, `INSERT INTO workspace_operations (id, workspace_id, runtime_host_id, runtime_session_id, kind, state, started_at, updated_at) VALUES (?, ?, ?, ?, 'export', ?, ?, ?)`,
					uuid.New(), w.workspace, w.host, w.session, v, fixtureTime, fixtureTime)
				return err
			}},
			{"host_cleanup_operations.stage", domain.CleanupStages.Strings(), func(v string) error {
				_, err := s.exec(ctx, `INSERT INTO host_cleanup_operations (id, runtime_host_id, stage, planned_runtime_host_bytes, removed_runtime_host_bytes, retained_export_bytes, created_at, updated_at) VALUES (?, ?, ?, 0, 0, 0, ?, ?)`,
					uuid.New(), newHost(t, s, a, domain.PlacementDedicated), v, fixtureTime, fixtureTime)
				return err
			}},
			{"provider_checkpoints.reason", domain.CheckpointReasons.Strings(), func(v string) error {
				_, err := s.exec(ctx, `INSERT INTO provider_checkpoints (id, runtime_host_id, reason, provider, provider_version, sessions, manifest_checksum, payload_bytes, created_at) VALUES (?, ?, ?, 'acp', '1', '{}', 'x', 0, ?)`,
					uuid.New(), ws.host, v, fixtureTime)
				return err
			}},
			{"runtime_permissions.state", domain.PermissionStates.Strings(), func(v string) error {
				var decidedAt *time.Time
				if v != string(domain.PermissionPending) {
					decidedAt = &fixtureTime
				}
				_, err := s.exec(ctx, `INSERT INTO runtime_permissions (id, agent_id, tool_key, title, summary, state, created_at, decided_at) VALUES (?, ?, 'edit', 't', 's', ?, ?, ?)`,
					uuid.New(), a.agent, v, fixtureTime, decidedAt)
				return err
			}},
			{"runtime_permissions.decision", domain.PermissionDecisions.Strings(), func(v string) error {
				_, err := s.exec(ctx, `INSERT INTO runtime_permissions (id, agent_id, tool_key, title, summary, state, decision, created_at, decided_at) VALUES (?, ?, 'edit', 't', 's', ?, ?, ?, ?)`,
					uuid.New(), a.agent, domain.PermissionDenied, v, fixtureTime, fixtureTime)
				return err
			}},
			{"questions.state", domain.QuestionStates.Strings(), func(v string) error {
				room := createRoom(t, s, uuid.NewString())
				var answeredAt *time.Time
				if v != string(domain.QuestionPending) {
					answeredAt = &fixtureTime
				}
				_, err := s.exec(ctx, `INSERT INTO questions (id, room_id, agent_id, runtime_session_id, recipient, text, code, state, created_at, answered_at) VALUES (?, ?, ?, ?, 'ada', 'q', 'Q2K2', ?, ?, ?)`,
					uuid.New(), room.ID, a.agent, uuid.New(), v, fixtureTime, answeredAt)
				return err
			}},
		}
		for _, c := range columns {
			for _, v := range c.values {
				if err := c.insert(v); err != nil {
					t.Errorf("%s refused domain value %q: %v", c.name, v, err)
				}
			}
			if err := c.insert("not-a-" + c.name); !errors.Is(err, ErrConstraint) {
				t.Errorf("%s accepted an unknown value (err=%v), want ErrConstraint", c.name, err)
			}
		}
	})
}

func TestNodesRegisterHeartbeatAndList(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		before, err := s.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.RegisterNode(ctx, domain.Node{Name: "node-a", Hostname: "host-a", PID: 42, Version: "dev", DataDir: "/data"})
		if err != nil {
			t.Fatal(err)
		}
		if n.StartedAt.Before(before) || !n.HeartbeatAt.Equal(n.StartedAt) || n.StartedAt.Location() != time.UTC {
			t.Fatalf("registered %+v (database clock was %v)", n, before)
		}
		time.Sleep(5 * time.Millisecond)
		if err := s.HeartbeatNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetNode(ctx, "node-a")
		if err != nil {
			t.Fatal(err)
		}
		if !got.HeartbeatAt.After(n.HeartbeatAt) || !got.StartedAt.Equal(n.StartedAt) || got.PID != 42 || got.DataDir != "/data" {
			t.Fatalf("node %+v after heartbeat", got)
		}
		// A restart of the same node (same host and directory) re-registers under the name.
		if _, err := s.RegisterNode(ctx, domain.Node{Name: "node-a", Hostname: "host-a", PID: 43, DataDir: "/data"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RegisterNode(ctx, domain.Node{Name: "node-b", Hostname: "host-b", DataDir: "/b"}); err != nil {
			t.Fatal(err)
		}
		nodes, err := s.ListNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 2 || nodes[0].Name != "node-a" || nodes[0].PID != 43 || nodes[1].Name != "node-b" {
			t.Fatalf("nodes %+v", nodes)
		}
		// The displaced process's heartbeat no longer matches its row.
		if err := s.HeartbeatNode(ctx, n); !errors.Is(err, ErrNotFound) {
			t.Fatalf("heartbeat of the replaced process: %v, want ErrNotFound", err)
		}
	})
}

func TestANodeNameServedByAnotherLiveMachineIsRefused(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.RegisterNode(ctx, domain.Node{Name: "w1", Hostname: "host-a", PID: 1, DataDir: "/data"}); err != nil {
			t.Fatal(err)
		}
		for _, other := range []domain.Node{
			{Name: "w1", Hostname: "host-b", PID: 1, DataDir: "/data"},
			{Name: "w1", Hostname: "host-a", PID: 2, DataDir: "/other"},
		} {
			if _, err := s.RegisterNode(ctx, other); !errors.Is(err, ErrNodeTaken) || !errors.Is(err, ErrConflict) {
				t.Fatalf("%+v: err = %v, want ErrNodeTaken", other, err)
			}
		}
		// Once the first worker's heartbeat is stale, the name may move.
		old := fixtureTime.Add(-time.Hour)
		mustExec(t, s, `UPDATE nodes SET heartbeat_at = ? WHERE name = ?`, old, "w1")
		if _, err := s.RegisterNode(ctx, domain.Node{Name: "w1", Hostname: "host-b", PID: 9, DataDir: "/data"}); err != nil {
			t.Fatalf("taking over a stale node: %v", err)
		}
	})
}

func TestHeartbeatOfUnregisteredNodeIsNotFound(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		if err := s.HeartbeatNode(context.Background(), domain.Node{Name: "ghost"}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
		if _, err := s.GetNode(context.Background(), "ghost"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
}

func TestRegisterNodeRefusesBadNames(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		for _, name := range []string{"", "-lead", "has space", "a/b", string(make([]byte, 64))} {
			var ve *domain.ValidationError
			if _, err := s.RegisterNode(context.Background(), domain.Node{Name: name}); !errors.As(err, &ve) {
				t.Errorf("name %q: err = %v, want a validation error", name, err)
			}
		}
	})
}

func TestSettingsAreValidatedAndRoundTrip(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.GetSetting(ctx, domain.SettingIdleSecs); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unset setting: %v", err)
		}
		if err := s.PutSetting(ctx, domain.SettingIdleSecs, json.RawMessage(` 120 `), fixtureTime); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetSetting(ctx, domain.SettingIdleSecs)
		if err != nil || string(got.Value) != "120" || !got.UpdatedAt.Equal(fixtureTime) {
			t.Fatalf("got %+v, %v", got, err)
		}
		for _, bad := range []string{`"x"`, `0`, `1.5`, `{`} {
			var ve *domain.ValidationError
			if err := s.PutSetting(ctx, domain.SettingIdleSecs, json.RawMessage(bad), fixtureTime); !errors.As(err, &ve) {
				t.Errorf("value %s: err = %v, want a validation error", bad, err)
			}
		}
		if err := s.PutSetting(ctx, "no.such.setting", json.RawMessage(`1`), fixtureTime); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown key: err = %v, want ErrNotFound", err)
		}
		all, err := s.ListSettings(ctx)
		if err != nil || len(all) != 1 || string(all[0].Value) != "120" {
			t.Fatalf("list: %+v, %v", all, err)
		}
	})
}

func runningOp(ws workspaceFixture) domain.WorkspaceOperation {
	return domain.WorkspaceOperation{
		ID: uuid.New(), WorkspaceID: ws.workspace, RuntimeHostID: ws.host, RuntimeSessionID: ws.session,
		Kind: domain.WorkspaceOpExport, State: domain.OpRunning, Intent: `{"retention":"keep_latest"}`,
		StartedAt: fixtureTime, UpdatedAt: fixtureTime,
	}
}

func finished(op domain.WorkspaceOperation, state domain.WorkspaceOpState, class string) domain.WorkspaceOperation {
	at := op.StartedAt.Add(time.Minute)
	op.State, op.ResultClass, op.UpdatedAt, op.FinishedAt = state, class, at, &at
	return op
}

func TestWorkspaceOperationsMoveForwardOnlyAndJournalEachChange(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		ws := newWorkspace(t, s)
		op := runningOp(ws)
		if changed, err := s.UpsertWorkspaceOperation(ctx, op); err != nil || !changed {
			t.Fatalf("create: changed=%v err=%v", changed, err)
		}
		// An exact retry changes nothing and appends nothing.
		if changed, err := s.UpsertWorkspaceOperation(ctx, op); err != nil || changed {
			t.Fatalf("identical retry: changed=%v err=%v", changed, err)
		}
		// Immutable fields cannot change under the same id.
		for name, mutate := range map[string]func(*domain.WorkspaceOperation){
			"kind":       func(o *domain.WorkspaceOperation) { o.Kind = domain.WorkspaceOpArchive },
			"workspace":  func(o *domain.WorkspaceOperation) { o.RuntimeSessionID = uuid.New() },
			"intent":     func(o *domain.WorkspaceOperation) { o.Intent = `{"retention":"keep_all"}` },
			"started_at": func(o *domain.WorkspaceOperation) { o.StartedAt = o.StartedAt.Add(time.Second) },
		} {
			changed := op
			mutate(&changed)
			if _, err := s.UpsertWorkspaceOperation(ctx, changed); !errors.Is(err, domain.ErrInvalidTransition) {
				t.Errorf("changing %s: err = %v, want ErrInvalidTransition", name, err)
			}
		}
		// Running cannot go back to pending.
		back := op
		back.State = domain.OpPending
		if _, err := s.UpsertWorkspaceOperation(ctx, back); !errors.Is(err, domain.ErrInvalidTransition) {
			t.Fatalf("running -> pending: err = %v", err)
		}
		done := finished(op, domain.OpSucceeded, "exported")
		if changed, err := s.UpsertWorkspaceOperation(ctx, done); err != nil || !changed {
			t.Fatalf("succeed: changed=%v err=%v", changed, err)
		}
		if changed, err := s.UpsertWorkspaceOperation(ctx, done); err != nil || changed {
			t.Fatalf("identical terminal retry: changed=%v err=%v", changed, err)
		}
		// A terminal operation cannot be rewritten as a different terminal outcome.
		if _, err := s.UpsertWorkspaceOperation(ctx, finished(op, domain.OpFailed, "interrupted")); !errors.Is(err, domain.ErrInvalidTransition) {
			t.Fatalf("succeeded -> failed: err = %v", err)
		}
		got, err := s.GetWorkspaceOperation(ctx, op.ID)
		if err != nil || got.State != domain.OpSucceeded || got.ResultClass != "exported" || got.FinishedAt == nil ||
			!got.FinishedAt.Equal(*done.FinishedAt) || got.Intent != op.Intent {
			t.Fatalf("stored %+v, %v", got, err)
		}
		events, err := s.WorkspaceOperationEvents(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 2 || events[0].Seq != 1 || events[0].State != "running" || events[1].Seq != 2 ||
			events[1].State != "succeeded" || events[1].Detail != "exported" {
			t.Fatalf("events %+v", events)
		}
	})
}

func TestWorkspaceOperationTransitionTable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		from, to domain.WorkspaceOpState
		ok       bool
	}{
		{domain.OpPending, domain.OpRunning, true},
		{domain.OpPending, domain.OpFailed, true},
		{domain.OpPending, domain.OpCancelled, true},
		{domain.OpPending, domain.OpSucceeded, false},
		{domain.OpRunning, domain.OpSucceeded, true},
		{domain.OpRunning, domain.OpFailed, true},
		{domain.OpRunning, domain.OpCancelled, true},
		{domain.OpRunning, domain.OpPending, false},
		{domain.OpFailed, domain.OpRunning, false},
		{domain.OpCancelled, domain.OpSucceeded, false},
	}
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s_to_%s", c.from, c.to), func(t *testing.T) {
				ws := newWorkspace(t, s)
				op := runningOp(ws)
				op.State = c.from
				if c.from.Terminal() {
					op = finished(op, c.from, "")
					// Reach the terminal state the legal way first.
					start := op
					start.State, start.FinishedAt, start.UpdatedAt = domain.OpRunning, nil, start.StartedAt
					if _, err := s.UpsertWorkspaceOperation(ctx, start); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := s.UpsertWorkspaceOperation(ctx, op); err != nil {
					t.Fatalf("seed %s: %v", c.from, err)
				}
				next := op
				next.State, next.FinishedAt = c.to, nil
				if c.to.Terminal() {
					next = finished(op, c.to, "x")
				}
				_, err := s.UpsertWorkspaceOperation(ctx, next)
				if c.ok && err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !c.ok && !errors.Is(err, domain.ErrInvalidTransition) {
					t.Fatalf("err = %v, want ErrInvalidTransition", err)
				}
			})
		}
	})
}

func TestAtMostOneRunningOperationPerWorkspace(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		ws := newWorkspace(t, s)
		first := runningOp(ws)
		if _, err := s.UpsertWorkspaceOperation(ctx, first); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpsertWorkspaceOperation(ctx, runningOp(ws)); !errors.Is(err, ErrConflict) {
			t.Fatalf("second running op: err = %v, want ErrConflict", err)
		}
		if _, err := s.UpsertWorkspaceOperation(ctx, runningOp(newWorkspace(t, s))); err != nil {
			t.Fatalf("another workspace's op: %v", err)
		}
		if _, err := s.UpsertWorkspaceOperation(ctx, finished(first, domain.OpSucceeded, "")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpsertWorkspaceOperation(ctx, runningOp(ws)); err != nil {
			t.Fatalf("op after the first finished: %v", err)
		}
	})
}

func TestOneLiveSharedRuntimeHostPerAgent(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		a := newAgent(t, s)
		if err := insertHost(s, a, uuid.New(), domain.PlacementShared, domain.HostActive); err != nil {
			t.Fatal(err)
		}
		if err := insertHost(s, a, uuid.New(), domain.PlacementShared, domain.HostParked); !errors.Is(err, ErrConflict) {
			t.Fatalf("second live shared host: err = %v, want ErrConflict", err)
		}
		for _, st := range []domain.RuntimeHostState{domain.HostArchived, domain.HostRemoved} {
			if err := insertHost(s, a, uuid.New(), domain.PlacementShared, st); err != nil {
				t.Fatalf("%s shared host beside a live one: %v", st, err)
			}
		}
		for i := 0; i < 2; i++ {
			if err := insertHost(s, a, uuid.New(), domain.PlacementDedicated, domain.HostActive); err != nil {
				t.Fatalf("dedicated host %d: %v", i, err)
			}
		}
		if err := insertHost(s, newAgent(t, s), uuid.New(), domain.PlacementShared, domain.HostActive); err != nil {
			t.Fatalf("another agent's shared host: %v", err)
		}
	})
}

func TestOneActiveBindingPerAgentAndRoom(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		room := uuid.New()
		bind := func(active bool) error {
			_, err := s.exec(ctx, `INSERT INTO room_bindings (id, agent_id, room_id, runtime_session_id, active, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				uuid.New(), a.agent, room, newSession(t, s, a), active, fixtureTime, fixtureTime)
			return err
		}
		if err := bind(true); err != nil {
			t.Fatal(err)
		}
		if err := bind(true); !errors.Is(err, ErrConflict) {
			t.Fatalf("second active binding: err = %v, want ErrConflict", err)
		}
		if err := bind(false); err != nil {
			t.Fatalf("inactive tombstone beside the active binding: %v", err)
		}
	})
}

func TestOneRuntimeHostPerRuntimeSession(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		session := newSession(t, s, a)
		member := func(host uuid.UUID) error {
			_, err := s.exec(ctx, `INSERT INTO runtime_host_sessions (runtime_session_id, runtime_host_id, state, created_at, updated_at) VALUES (?, ?, 'active', ?, ?)`,
				session, host, fixtureTime, fixtureTime)
			return err
		}
		if err := member(newHost(t, s, a, domain.PlacementDedicated)); err != nil {
			t.Fatal(err)
		}
		if err := member(newHost(t, s, a, domain.PlacementDedicated)); !errors.Is(err, ErrConflict) {
			t.Fatalf("second host for one session: err = %v, want ErrConflict", err)
		}
		if err := member(uuid.New()); !errors.Is(err, ErrConflict) {
			t.Fatalf("membership of a missing host: err = %v, want ErrConflict (dangling reference)", err)
		}
	})
}

func TestHostCleanupStagesAdvanceOneAtATime(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		op := domain.HostCleanupOperation{
			ID: uuid.New(), RuntimeHostID: newHost(t, s, a, domain.PlacementShared), Stage: domain.CleanupPrepared,
			PlannedRuntimeHostBytes: 4096, RetainedExportBytes: 1024, CreatedAt: fixtureTime, UpdatedAt: fixtureTime,
		}
		skip := op
		skip.Stage = domain.CleanupSandboxRemoved
		if _, err := s.UpsertHostCleanup(ctx, skip); !errors.Is(err, domain.ErrInvalidTransition) {
			t.Fatalf("new cleanup past prepared: err = %v", err)
		}
		if changed, err := s.UpsertHostCleanup(ctx, op); err != nil || !changed {
			t.Fatalf("prepare: %v %v", changed, err)
		}
		if changed, err := s.UpsertHostCleanup(ctx, op); err != nil || changed {
			t.Fatalf("identical retry: %v %v", changed, err)
		}
		second := op
		second.ID = uuid.New()
		if _, err := s.UpsertHostCleanup(ctx, second); !errors.Is(err, ErrConflict) {
			t.Fatalf("second cleanup of one host: err = %v, want ErrConflict", err)
		}
		rootFirst := op
		rootFirst.Stage = domain.CleanupRootRemoved
		if _, err := s.UpsertHostCleanup(ctx, rootFirst); !errors.Is(err, domain.ErrInvalidTransition) {
			t.Fatalf("root before sandbox: err = %v", err)
		}
		plan := op
		plan.PlannedRuntimeHostBytes = 1
		if _, err := s.UpsertHostCleanup(ctx, plan); !errors.Is(err, domain.ErrInvalidTransition) {
			t.Fatalf("changing the plan: err = %v", err)
		}
		for i, stage := range []domain.CleanupStage{domain.CleanupSandboxRemoved, domain.CleanupRootRemoved, domain.CleanupSucceeded} {
			op.Stage, op.UpdatedAt = stage, fixtureTime.Add(time.Duration(i+1)*time.Second)
			op.RemovedRuntimeHostBytes = int64(i+1) * 1000
			if _, err := s.UpsertHostCleanup(ctx, op); err != nil {
				t.Fatalf("advance to %s: %v", stage, err)
			}
		}
		back := op
		back.Stage = domain.CleanupRootRemoved
		if _, err := s.UpsertHostCleanup(ctx, back); !errors.Is(err, domain.ErrInvalidTransition) {
			t.Fatalf("after succeeded: err = %v", err)
		}
		events, err := s.HostCleanupEvents(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"prepared", "sandbox_removed", "root_removed", "succeeded"}
		if len(events) != len(want) {
			t.Fatalf("events %+v", events)
		}
		for i, e := range events {
			if e.State != want[i] || e.Seq != int64(i+1) {
				t.Fatalf("event %d = %+v, want %s", i, e, want[i])
			}
		}
	})
}

func TestInTxRollsBackEverythingOnError(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		boom := errors.New("boom")
		err := s.InTx(ctx, func(q *Q) error {
			if err := q.PutSetting(ctx, domain.SettingIdleSecs, json.RawMessage(`5`), fixtureTime); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		if _, err := s.GetSetting(ctx, domain.SettingIdleSecs); !errors.Is(err, ErrNotFound) {
			t.Fatalf("write survived the rollback: %v", err)
		}
	})
}

// Concurrent read-modify-write transactions on one row must not lose an increment: InTx
// lines writers up (the Postgres writer lock, SQLite's IMMEDIATE) and retries what collides.
func TestInTxRetriesConflictingTransactionsWithoutLosingWrites(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if err := s.PutSetting(ctx, domain.SettingIdleSecs, json.RawMessage(`1`), fixtureTime); err != nil {
			t.Fatal(err)
		}
		const workers, each = 4, 10
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					errs <- s.InTx(ctx, func(q *Q) error {
						cur, err := q.GetSetting(ctx, domain.SettingIdleSecs)
						if err != nil {
							return err
						}
						var n int
						if err := json.Unmarshal(cur.Value, &n); err != nil {
							return err
						}
						return q.PutSetting(ctx, domain.SettingIdleSecs, json.RawMessage(fmt.Sprint(n+1)), fixtureTime)
					})
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.GetSetting(ctx, domain.SettingIdleSecs)
		if err != nil || string(got.Value) != fmt.Sprint(1+workers*each) {
			t.Fatalf("counter = %s (%v), want %d", got.Value, err, 1+workers*each)
		}
	})
}
