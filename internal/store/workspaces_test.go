package store

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/schema"
)

func exportOf(ws workspaceFixture, at time.Time) domain.WorkspaceExport {
	checkpoint := uuid.New()
	return domain.WorkspaceExport{ID: uuid.New(), WorkspaceID: ws.workspace, RuntimeHostID: ws.host,
		RuntimeSessionID: ws.session, CheckpointID: &checkpoint, ManifestChecksum: "sha256:abc", Bytes: 4096, CreatedAt: at}
}

func mustInsertExport(t *testing.T, s *Store, e domain.WorkspaceExport) {
	t.Helper()
	if created, err := s.InsertWorkspaceExport(context.Background(), e); err != nil || !created {
		t.Fatalf("insert export: created=%v err=%v", created, err)
	}
}

func TestManagedWorkspacesReadBackByHostAndTakeExplicitStates(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		host, other := newHost(t, s, a, domain.PlacementShared), newHost(t, s, a, domain.PlacementDedicated)
		first, second, elsewhere := newSession(t, s, a), newSession(t, s, a), newSession(t, s, a)
		for _, w := range []struct {
			host, session uuid.UUID
			source        domain.WorkspaceSource
			path          string
			at            time.Time
		}{
			{host, first, domain.WorkspaceManaged, "/srv/jam/ws/first", fixtureTime},
			{host, second, domain.WorkspaceDirectHost, "", fixtureTime.Add(time.Second)},
			{other, elsewhere, domain.WorkspaceManaged, "", fixtureTime.Add(2 * time.Second)},
		} {
			if err := s.RecordManagedWorkspace(ctx, w.host, w.session, w.source, w.path, domain.WorkspaceReady, w.at); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.GetManagedWorkspace(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		want := domain.ManagedWorkspace{ID: first, RuntimeHostID: host, RuntimeSessionID: first, Source: domain.WorkspaceManaged,
			HostPath: "/srv/jam/ws/first", State: domain.WorkspaceReady, CreatedAt: fixtureTime, UpdatedAt: fixtureTime}
		if got != want || got.CreatedAt.Location() != time.UTC {
			t.Fatalf("workspace %+v, want %+v", got, want)
		}
		if got, err := s.GetManagedWorkspace(ctx, second); err != nil || got.HostPath != "" || got.Source != domain.WorkspaceDirectHost {
			t.Fatalf("workspace without a host path: %+v %v", got, err)
		}
		if _, err := s.GetManagedWorkspace(ctx, uuid.New()); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown workspace: %v, want ErrNotFound", err)
		}

		for _, c := range []struct {
			name string
			host uuid.UUID
			want []uuid.UUID
		}{
			{"one host, oldest first", host, []uuid.UUID{first, second}},
			{"every host", uuid.Nil, []uuid.UUID{first, second, elsewhere}},
			{"a host without workspaces", uuid.New(), nil},
		} {
			list, err := s.ListManagedWorkspaces(ctx, c.host)
			if err != nil || len(list) != len(c.want) {
				t.Fatalf("%s: %+v %v", c.name, list, err)
			}
			for i, w := range list {
				if w.ID != c.want[i] {
					t.Fatalf("%s: [%d] = %s, want %s", c.name, i, w.ID, c.want[i])
				}
			}
		}

		later := fixtureTime.Add(time.Hour)
		if err := s.SetWorkspaceState(ctx, second, domain.WorkspaceRemovalBlocked, later); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetManagedWorkspace(ctx, second); err != nil || got.State != domain.WorkspaceRemovalBlocked || !got.UpdatedAt.Equal(later) {
			t.Fatalf("after set state: %+v %v", got, err)
		}
		if err := s.SetWorkspaceState(ctx, uuid.New(), domain.WorkspaceReady, later); !errors.Is(err, ErrNotFound) {
			t.Fatalf("state of an unknown workspace: %v, want ErrNotFound", err)
		}
		var ve *domain.ValidationError
		if err := s.SetWorkspaceState(ctx, first, "melted", later); !errors.As(err, &ve) || ve.Field != "state" {
			t.Fatalf("unknown state: %v, want a validation error", err)
		}
	})
}

// Provisioning re-records a workspace's state after the fact; an archive must not be undone
// by a late record. Only an explicit state change (a restore) brings an archived one back.
func TestRecordingAManagedWorkspaceNeverOverwritesAnArchivedOne(t *testing.T) {
	t.Parallel()
	cases := []struct {
		stored, recorded, want domain.WorkspaceState
	}{
		{domain.WorkspaceProvisioning, domain.WorkspaceReady, domain.WorkspaceReady},
		{domain.WorkspaceReady, domain.WorkspaceNeedsReconciliation, domain.WorkspaceNeedsReconciliation},
		{domain.WorkspaceRemovalBlocked, domain.WorkspaceReady, domain.WorkspaceReady},
		{domain.WorkspaceArchived, domain.WorkspaceReady, domain.WorkspaceArchived},
		{domain.WorkspaceArchived, domain.WorkspaceProvisionFailed, domain.WorkspaceArchived},
	}
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		host := newHost(t, s, a, domain.PlacementShared)
		later := fixtureTime.Add(time.Minute)
		for _, c := range cases {
			session := newSession(t, s, a)
			if err := s.RecordManagedWorkspace(ctx, host, session, domain.WorkspaceManaged, "", c.stored, fixtureTime); err != nil {
				t.Fatal(err)
			}
			if err := s.RecordManagedWorkspace(ctx, host, session, domain.WorkspaceManaged, "", c.recorded, later); err != nil {
				t.Fatalf("%s then %s: %v", c.stored, c.recorded, err)
			}
			got, err := s.GetManagedWorkspace(ctx, session)
			if err != nil || got.State != c.want {
				t.Fatalf("%s then %s: %+v %v, want %s", c.stored, c.recorded, got, err, c.want)
			}
			if wantAt := map[bool]time.Time{true: fixtureTime, false: later}[c.stored == domain.WorkspaceArchived]; !got.UpdatedAt.Equal(wantAt) {
				t.Fatalf("%s then %s: updated_at %v, want %v", c.stored, c.recorded, got.UpdatedAt, wantAt)
			}
			if c.stored == domain.WorkspaceArchived {
				if err := s.SetWorkspaceState(ctx, session, domain.WorkspaceReady, later); err != nil {
					t.Fatal(err)
				}
				if got, err := s.GetManagedWorkspace(ctx, session); err != nil || got.State != domain.WorkspaceReady {
					t.Fatalf("restored archived workspace: %+v %v", got, err)
				}
			}
		}
	})
}

func TestExportExactRetryChangesNothingAndChangedRecordConflicts(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		ws := newWorkspace(t, s)
		e := exportOf(ws, fixtureTime)
		mustInsertExport(t, s, e)

		retry := e
		// Sub-microsecond noise is below the stored precision: still the same record.
		retry.CreatedAt = e.CreatedAt.Add(300 * time.Nanosecond)
		if created, err := s.InsertWorkspaceExport(ctx, retry); err != nil || created {
			t.Fatalf("exact retry: created=%v err=%v", created, err)
		}
		// The deletion stamp is not part of the immutable record.
		if err := s.MarkExportDeleted(ctx, e.ID, fixtureTime.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if created, err := s.InsertWorkspaceExport(ctx, e); err != nil || created {
			t.Fatalf("exact retry of a deleted export: created=%v err=%v", created, err)
		}

		otherCheckpoint := uuid.New()
		for name, mutate := range map[string]func(*domain.WorkspaceExport){
			"workspace":         func(x *domain.WorkspaceExport) { x.WorkspaceID = uuid.New() },
			"host":              func(x *domain.WorkspaceExport) { x.RuntimeHostID = uuid.New() },
			"session":           func(x *domain.WorkspaceExport) { x.RuntimeSessionID = uuid.New() },
			"checkpoint":        func(x *domain.WorkspaceExport) { x.CheckpointID = &otherCheckpoint },
			"no checkpoint":     func(x *domain.WorkspaceExport) { x.CheckpointID = nil },
			"manifest checksum": func(x *domain.WorkspaceExport) { x.ManifestChecksum = "sha256:def" },
			"bytes":             func(x *domain.WorkspaceExport) { x.Bytes++ },
			"created_at":        func(x *domain.WorkspaceExport) { x.CreatedAt = x.CreatedAt.Add(time.Microsecond) },
		} {
			changed := e
			mutate(&changed)
			created, err := s.InsertWorkspaceExport(ctx, changed)
			if created || !errors.Is(err, ErrConflict) || !errors.Is(err, ErrExportChanged) {
				t.Errorf("changed %s: created=%v err=%v, want ErrConflict", name, created, err)
			}
		}
		got, err := s.GetWorkspaceExport(ctx, e.ID)
		if err != nil || got.WorkspaceID != e.WorkspaceID || got.ManifestChecksum != e.ManifestChecksum || got.Bytes != e.Bytes ||
			got.CheckpointID == nil || *got.CheckpointID != *e.CheckpointID || !got.CreatedAt.Equal(e.CreatedAt) || got.DeletedAt == nil {
			t.Fatalf("stored export %+v %v", got, err)
		}
		// No checkpoint is a valid record too, and retries the same way.
		bare := exportOf(ws, fixtureTime)
		bare.CheckpointID = nil
		mustInsertExport(t, s, bare)
		if created, err := s.InsertWorkspaceExport(ctx, bare); err != nil || created {
			t.Fatalf("exact retry without a checkpoint: created=%v err=%v", created, err)
		}
		if got, err := s.GetWorkspaceExport(ctx, bare.ID); err != nil || got.CheckpointID != nil {
			t.Fatalf("export without a checkpoint: %+v %v", got, err)
		}
		if _, err := s.GetWorkspaceExport(ctx, uuid.New()); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown export: %v, want ErrNotFound", err)
		}
	})
}

func TestExportRecordsRefuseMissingIdsChecksumAndNegativeBytes(t *testing.T) {
	t.Parallel()
	nilCheckpoint := uuid.Nil
	cases := []struct {
		field  string
		mutate func(*domain.WorkspaceExport)
	}{
		{"id", func(x *domain.WorkspaceExport) { x.ID = uuid.Nil }},
		{"workspace_id", func(x *domain.WorkspaceExport) { x.WorkspaceID = uuid.Nil }},
		{"runtime_host_id", func(x *domain.WorkspaceExport) { x.RuntimeHostID = uuid.Nil }},
		{"runtime_session_id", func(x *domain.WorkspaceExport) { x.RuntimeSessionID = uuid.Nil }},
		{"checkpoint_id", func(x *domain.WorkspaceExport) { x.CheckpointID = &nilCheckpoint }},
		{"manifest_checksum", func(x *domain.WorkspaceExport) { x.ManifestChecksum = "" }},
		{"bytes", func(x *domain.WorkspaceExport) { x.Bytes = -1 }},
		{"created_at", func(x *domain.WorkspaceExport) { x.CreatedAt = time.Time{} }},
	}
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		ws := newWorkspace(t, s)
		for _, c := range cases {
			e := exportOf(ws, fixtureTime)
			c.mutate(&e)
			_, err := s.InsertWorkspaceExport(ctx, e)
			vs, ok := domain.AsValidations(err)
			if !ok || len(vs) != 1 || vs[0].Field != c.field {
				t.Errorf("bad %s: err = %v, want one validation error on it", c.field, err)
			}
		}
		zero := exportOf(ws, fixtureTime)
		zero.Bytes = 0
		mustInsertExport(t, s, zero)
		if list, err := s.ListWorkspaceExports(ctx, ws.workspace); err != nil || len(list) != 1 {
			t.Fatalf("only the valid export is stored: %+v %v", list, err)
		}
	})
}

func TestExportsListNewestFirstAndTheirDeletionIsStampedOnce(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		ws := newWorkspace(t, s)
		oldest := exportOf(ws, fixtureTime)
		tieA, tieB := exportOf(ws, fixtureTime.Add(time.Minute)), exportOf(ws, fixtureTime.Add(time.Minute))
		if bytes.Compare(tieA.ID[:], tieB.ID[:]) < 0 {
			tieA, tieB = tieB, tieA // tieA sorts first: the larger id
		}
		// Another workspace on the same host (a Shared host's sibling session).
		sibling := exportOf(workspaceFixture{workspace: uuid.New(), host: ws.host, session: uuid.New()}, fixtureTime.Add(time.Hour))
		elsewhere := exportOf(newWorkspace(t, s), fixtureTime.Add(2*time.Hour))
		for _, e := range []domain.WorkspaceExport{oldest, tieB, tieA, sibling, elsewhere} {
			mustInsertExport(t, s, e)
		}
		first, second := fixtureTime.Add(3*time.Hour), fixtureTime.Add(4*time.Hour)
		if err := s.MarkExportDeleted(ctx, oldest.ID, first); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkExportDeleted(ctx, oldest.ID, second); err != nil {
			t.Fatalf("second deletion: %v", err)
		}
		if err := s.MarkExportDeleted(ctx, uuid.New(), first); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleting an unknown export: %v, want ErrNotFound", err)
		}

		for _, c := range []struct {
			name string
			list func() ([]domain.WorkspaceExport, error)
			want []uuid.UUID
		}{
			{"workspace", func() ([]domain.WorkspaceExport, error) { return s.ListWorkspaceExports(ctx, ws.workspace) },
				[]uuid.UUID{tieA.ID, tieB.ID, oldest.ID}},
			{"host", func() ([]domain.WorkspaceExport, error) { return s.ListHostExports(ctx, ws.host) },
				[]uuid.UUID{sibling.ID, tieA.ID, tieB.ID, oldest.ID}},
			{"unknown workspace", func() ([]domain.WorkspaceExport, error) { return s.ListWorkspaceExports(ctx, uuid.New()) }, nil},
		} {
			list, err := c.list()
			if err != nil || len(list) != len(c.want) {
				t.Fatalf("%s: %+v %v", c.name, list, err)
			}
			for i, e := range list {
				if e.ID != c.want[i] {
					t.Fatalf("%s: [%d] = %s, want %s", c.name, i, e.ID, c.want[i])
				}
				if deleted := e.DeletedAt != nil; deleted != (e.ID == oldest.ID) {
					t.Fatalf("%s: export %s deleted_at %v", c.name, e.ID, e.DeletedAt)
				}
			}
		}
		got, err := s.GetWorkspaceExport(ctx, oldest.ID)
		if err != nil || got.DeletedAt == nil || !got.DeletedAt.Equal(first) || got.DeletedAt.Location() != time.UTC {
			t.Fatalf("deleted export %+v %v, want deleted_at %v (the first stamp)", got, err, first)
		}
	})
}

func TestTheRunningOperationIsFoundAndHistoryListsNewestFirst(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		ws := newWorkspace(t, s)
		if op, err := s.RunningWorkspaceOperation(ctx, ws.workspace); err != nil || op != nil {
			t.Fatalf("idle workspace: %+v %v", op, err)
		}
		ops := make([]domain.WorkspaceOperation, 3)
		for i := range ops {
			op := runningOp(ws)
			op.StartedAt = fixtureTime.Add(time.Duration(i) * time.Hour)
			op.UpdatedAt = op.StartedAt
			if _, err := s.UpsertWorkspaceOperation(ctx, op); err != nil {
				t.Fatal(err)
			}
			if i < len(ops)-1 {
				op = finished(op, domain.OpSucceeded, domain.ResultExported)
				if _, err := s.UpsertWorkspaceOperation(ctx, op); err != nil {
					t.Fatal(err)
				}
			}
			ops[i] = op
		}
		running, err := s.RunningWorkspaceOperation(ctx, ws.workspace)
		if err != nil || running == nil || running.ID != ops[2].ID || running.State != domain.OpRunning ||
			running.Intent != ops[2].Intent || !running.StartedAt.Equal(ops[2].StartedAt) {
			t.Fatalf("running %+v %v, want %s", running, err, ops[2].ID)
		}
		for _, c := range []struct {
			limit int
			want  []uuid.UUID
		}{
			{0, []uuid.UUID{ops[2].ID, ops[1].ID, ops[0].ID}},
			{2, []uuid.UUID{ops[2].ID, ops[1].ID}},
			{10, []uuid.UUID{ops[2].ID, ops[1].ID, ops[0].ID}},
		} {
			list, err := s.ListWorkspaceOperations(ctx, ws.workspace, c.limit)
			if err != nil || len(list) != len(c.want) {
				t.Fatalf("limit %d: %+v %v", c.limit, list, err)
			}
			for i, op := range list {
				if op.ID != c.want[i] {
					t.Fatalf("limit %d: [%d] = %s, want %s", c.limit, i, op.ID, c.want[i])
				}
			}
		}
		if list, err := s.ListWorkspaceOperations(ctx, uuid.New(), 0); err != nil || len(list) != 0 {
			t.Fatalf("unknown workspace: %+v %v", list, err)
		}
	})
}

// The unique index one_running_operation_per_workspace refuses a second running operation
// whether it is created running or a pending one is started, and the refused write leaves
// no trace (no row change, no event).
func TestASecondRunningOperationConflictsWhetherCreatedOrStarted(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		ws := newWorkspace(t, s)
		first := runningOp(ws)
		if _, err := s.UpsertWorkspaceOperation(ctx, first); err != nil {
			t.Fatal(err)
		}
		pending := runningOp(ws)
		pending.State = domain.OpPending
		if _, err := s.UpsertWorkspaceOperation(ctx, pending); err != nil {
			t.Fatalf("a pending operation beside the running one: %v", err)
		}
		started := pending
		started.UpdatedAt = pending.UpdatedAt.Add(time.Second)
		started.State = domain.OpRunning
		second := runningOp(ws)
		for name, op := range map[string]domain.WorkspaceOperation{"created running": second, "started from pending": started} {
			changed, err := s.UpsertWorkspaceOperation(ctx, op)
			if changed || !errors.Is(err, ErrConflict) {
				t.Errorf("%s: changed=%v err=%v, want ErrConflict", name, changed, err)
			}
			var ce *ConstraintError
			if s.Dialect() == schema.Postgres && (!errors.As(err, &ce) || ce.Constraint != "one_running_operation_per_workspace") {
				t.Errorf("%s: err = %v, want the constraint named", name, err)
			}
		}
		if _, err := s.GetWorkspaceOperation(ctx, second.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the refused operation was stored: %v", err)
		}
		if got, err := s.GetWorkspaceOperation(ctx, pending.ID); err != nil || got.State != domain.OpPending {
			t.Fatalf("the refused start changed the pending operation: %+v %v", got, err)
		}
		if events, err := s.WorkspaceOperationEvents(ctx, pending.ID); err != nil || len(events) != 1 {
			t.Fatalf("the refused start left events: %+v %v", events, err)
		}
		if running, err := s.RunningWorkspaceOperation(ctx, ws.workspace); err != nil || running == nil || running.ID != first.ID {
			t.Fatalf("running %+v %v, want the first", running, err)
		}
	})
}

func TestHostCleanupOfHostFindsTheHostsOneCleanup(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		host, clean := newHost(t, s, a, domain.PlacementShared), newHost(t, s, a, domain.PlacementDedicated)
		op := domain.HostCleanupOperation{ID: uuid.New(), RuntimeHostID: host, Stage: domain.CleanupPrepared,
			PlannedRuntimeHostBytes: 10, RetainedExportBytes: 5, CreatedAt: fixtureTime, UpdatedAt: fixtureTime}
		if _, err := s.UpsertHostCleanup(ctx, op); err != nil {
			t.Fatal(err)
		}
		if got, err := s.HostCleanupOfHost(ctx, host); err != nil || got != op {
			t.Fatalf("cleanup of host %+v %v, want %+v", got, err, op)
		}
		if _, err := s.HostCleanupOfHost(ctx, clean); !errors.Is(err, ErrNotFound) {
			t.Fatalf("host without a cleanup: %v, want ErrNotFound", err)
		}
		// Once finished, a host a restore revived may have a new cleanup, the one then found.
		second := op
		second.ID, second.CreatedAt, second.UpdatedAt = uuid.New(), fixtureTime.Add(time.Hour), fixtureTime.Add(time.Hour)
		if _, err := s.UpsertHostCleanup(ctx, second); !errors.Is(err, ErrConflict) {
			t.Fatalf("a second cleanup while one is open: %v, want ErrConflict", err)
		}
		for _, st := range []domain.CleanupStage{domain.CleanupSandboxRemoved, domain.CleanupRootRemoved, domain.CleanupSucceeded} {
			op.Stage = st
			if _, err := s.UpsertHostCleanup(ctx, op); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.UpsertHostCleanup(ctx, second); err != nil {
			t.Fatalf("a new cleanup after the finished one: %v", err)
		}
		if got, err := s.HostCleanupOfHost(ctx, host); err != nil || got.ID != second.ID {
			t.Fatalf("cleanup of host %+v %v, want the open one %s", got, err, second.ID)
		}
	})
}

func TestRestoringACheckpointPayloadClearsItsDeletionStamp(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		ws := newWorkspace(t, s)
		c := domain.ProviderCheckpoint{ID: uuid.New(), RuntimeHostID: ws.host, Reason: domain.CheckpointManual,
			Provider: domain.ProviderACP, ProviderVersion: "1", ManifestChecksum: "m", PayloadBytes: 1, CreatedAt: fixtureTime}
		if _, err := s.InsertCheckpoint(ctx, c); err != nil {
			t.Fatal(err)
		}
		mustExec(t, s, `UPDATE provider_checkpoints SET payload_deleted_at = ? WHERE id = ?`, fixtureTime, c.ID)
		for i := 0; i < 2; i++ { // the second restore finds nothing to clear and still succeeds
			if err := s.RestoreCheckpointPayload(ctx, c.ID); err != nil {
				t.Fatalf("restore %d: %v", i, err)
			}
			if got, err := s.GetCheckpoint(ctx, c.ID); err != nil || got.PayloadDeletedAt != nil {
				t.Fatalf("restore %d: %+v %v", i, got, err)
			}
		}
		if err := s.RestoreCheckpointPayload(ctx, uuid.New()); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown checkpoint: %v, want ErrNotFound", err)
		}
	})
}

// agentWithExport is an agent whose session has a workspace on a host with a checkpoint, an
// export of both, a running workspace operation and a host cleanup with two events.
type agentWithExport struct {
	agent   agentFixture
	host    uuid.UUID
	session uuid.UUID
	export  domain.WorkspaceExport
	cleanup domain.HostCleanupOperation
}

func newAgentWithExport(t *testing.T, s *Store) agentWithExport {
	t.Helper()
	ctx := context.Background()
	a := newAgent(t, s)
	f := agentWithExport{agent: a, host: newHost(t, s, a, domain.PlacementDedicated), session: newSession(t, s, a)}
	if err := s.RecordManagedWorkspace(ctx, f.host, f.session, domain.WorkspaceManaged, "/ws", domain.WorkspaceReady, fixtureTime); err != nil {
		t.Fatal(err)
	}
	checkpoint := domain.ProviderCheckpoint{ID: uuid.New(), RuntimeHostID: f.host, Reason: domain.CheckpointBeforeRemove,
		Provider: domain.ProviderACP, ProviderVersion: "1", ManifestChecksum: "m", PayloadBytes: 1, CreatedAt: fixtureTime}
	if _, err := s.InsertCheckpoint(ctx, checkpoint); err != nil {
		t.Fatal(err)
	}
	ws := workspaceFixture{workspace: f.session, host: f.host, session: f.session}
	f.export = exportOf(ws, fixtureTime)
	f.export.CheckpointID = &checkpoint.ID
	mustInsertExport(t, s, f.export)
	if _, err := s.UpsertWorkspaceOperation(ctx, runningOp(ws)); err != nil {
		t.Fatal(err)
	}
	f.cleanup = domain.HostCleanupOperation{ID: uuid.New(), RuntimeHostID: f.host, Stage: domain.CleanupPrepared,
		PlannedRuntimeHostBytes: 10, RetainedExportBytes: f.export.Bytes, CreatedAt: fixtureTime, UpdatedAt: fixtureTime}
	for _, stage := range []domain.CleanupStage{domain.CleanupPrepared, domain.CleanupSandboxRemoved} {
		f.cleanup.Stage = stage
		if _, err := s.UpsertHostCleanup(ctx, f.cleanup); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func countRows(t *testing.T, s *Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.get(context.Background(), &n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Deleting an agent cascades its sessions to their workspaces and its hosts to their
// checkpoints and cleanup records; the export records outlive all of them.
func TestDeletingAnAgentKeepsItsExportsAndTakesItsHostCleanups(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		f := newAgentWithExport(t, s)
		if err := s.DeleteAgent(ctx, f.agent.agent, fixtureTime.Add(time.Hour)); err != nil {
			t.Fatalf("delete agent: %v", err)
		}
		got, err := s.GetWorkspaceExport(ctx, f.export.ID)
		if err != nil || !sameExport(got, f.export) || got.DeletedAt != nil {
			t.Fatalf("export after its agent was deleted: %+v %v, want %+v", got, err, f.export)
		}
		if list, err := s.ListHostExports(ctx, f.host); err != nil || len(list) != 1 {
			t.Fatalf("host exports after its agent was deleted: %+v %v", list, err)
		}
		if _, err := s.GetManagedWorkspace(ctx, f.session); !errors.Is(err, ErrNotFound) {
			t.Fatalf("workspace: %v, want ErrNotFound", err)
		}
		if _, err := s.GetCheckpoint(ctx, *f.export.CheckpointID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("checkpoint: %v, want ErrNotFound", err)
		}
		if _, err := s.HostCleanupOfHost(ctx, f.host); !errors.Is(err, ErrNotFound) {
			t.Fatalf("host cleanup: %v, want ErrNotFound", err)
		}
		if n := countRows(t, s, `SELECT COUNT(*) FROM host_cleanup_events WHERE operation_id = ?`, f.cleanup.ID); n != 0 {
			t.Fatalf("%d host cleanup events outlived their operation", n)
		}
		if n := countRows(t, s, `SELECT COUNT(*) FROM workspace_operations WHERE workspace_id = ?`, f.session); n != 0 {
			t.Fatalf("%d workspace operations outlived their workspace", n)
		}
	})
}

// Migration 000005 rebuilds tables on SQLite; both directions keep the records (and the
// cleanup events that cascade from a rebuilt table). Going down deletes exports whose
// workspace is gone and clears references to checkpoints that are gone: the old schema's
// foreign keys cannot hold them.
func TestExportsMigrationKeepsRecordsGoingDownAndUp(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		f := newAgentWithExport(t, s)
		ws := workspaceFixture{workspace: f.session, host: f.host, session: f.session}
		orphan := exportOf(workspaceFixture{workspace: uuid.New(), host: f.host, session: uuid.New()}, fixtureTime)
		lostCheckpoint := exportOf(ws, fixtureTime.Add(time.Second))
		mustInsertExport(t, s, orphan)
		mustInsertExport(t, s, lostCheckpoint)
		if err := s.MarkExportDeleted(ctx, f.export.ID, fixtureTime.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		check := func(step string, wantExports int) {
			t.Helper()
			got, err := s.GetWorkspaceExport(ctx, f.export.ID)
			if err != nil || !sameExport(got, f.export) || got.DeletedAt == nil {
				t.Fatalf("%s: export %+v %v", step, got, err)
			}
			if list, err := s.ListWorkspaceExports(ctx, f.session); err != nil || len(list) != wantExports {
				t.Fatalf("%s: exports %+v %v", step, list, err)
			}
			if c, err := s.HostCleanupOfHost(ctx, f.host); err != nil || c != f.cleanup {
				t.Fatalf("%s: cleanup %+v %v", step, c, err)
			}
			if events, err := s.HostCleanupEvents(ctx, f.cleanup.ID); err != nil || len(events) != 2 ||
				events[1].State != string(domain.CleanupSandboxRemoved) || !events[1].RecordedAt.Equal(fixtureTime) {
				t.Fatalf("%s: cleanup events %+v %v", step, events, err)
			}
		}
		check("before", 2)

		// Down through 000005, whatever came after it.
		latest, err := schema.LatestVersion(s.Dialect())
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Down(ctx, s.Dialect(), s.DB(), int(latest)-4); err != nil {
			t.Fatalf("migrate down to 4: %v", err)
		}
		if v, err := schema.CurrentVersion(ctx, s.Dialect(), s.DB()); err != nil || v.Version != 4 || v.Dirty {
			t.Fatalf("after down: %+v %v", v, err)
		}
		check("after down", 2)
		if _, err := s.GetWorkspaceExport(ctx, orphan.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("export of a missing workspace after down: %v, want ErrNotFound", err)
		}
		if got, err := s.GetWorkspaceExport(ctx, lostCheckpoint.ID); err != nil || got.CheckpointID != nil {
			t.Fatalf("export of a missing checkpoint after down: %+v %v", got, err)
		}
		if _, err := s.InsertWorkspaceExport(ctx, orphan); !errors.Is(err, ErrConflict) {
			t.Fatalf("down restored no workspace foreign key: %v", err)
		}

		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("migrate up again: %v", err)
		}
		check("after up again", 2)
		mustInsertExport(t, s, orphan)
		if err := s.DeleteAgent(ctx, f.agent.agent, fixtureTime.Add(time.Hour)); err != nil {
			t.Fatalf("delete agent after up again: %v", err)
		}
		if _, err := s.GetWorkspaceExport(ctx, f.export.ID); err != nil {
			t.Fatalf("export after its agent was deleted: %v", err)
		}
	})
}
