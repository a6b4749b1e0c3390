package workflows

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
	"github.com/jam-dev/jam/internal/workspace"
)

// opFixture is a Shared runtime host with two rooms (two sessions, two managed
// workspaces) in a real store and a real data directory.
type opFixture struct {
	t        *testing.T
	st       *store.Store
	layout   domain.Layout
	host     domain.RuntimeHost
	sessions []uuid.UUID
	paths    workspace.Paths
	stops    []uuid.UUID
	settles  []settled
}

// settled is one host settle: what had happened when it came.
type settled struct {
	host           uuid.UUID
	stops, exports int
}

func newOpFixture(t *testing.T) *opFixture {
	t.Helper()
	ctx := context.Background()
	st := teststore.SQLite(t)
	now := time.Now()
	a, err := st.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: "keeper", Kind: domain.AgentOwned, CreatedAt: now}, "")
	if err != nil {
		t.Fatal(err)
	}
	shared := domain.PlacementShared
	cfg := domain.TemplateConfig{Alias: "default", Transport: domain.TransportCursorACP, Placement: &shared,
		Sandbox: domain.SandboxConfig{Enabled: true}}.Normalized()
	tmpl, err := st.CreateTemplate(ctx, domain.Template{ID: uuid.New(), AgentID: a.ID, Config: cfg, CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	f := &opFixture{t: t, st: st, layout: domain.Layout{Root: t.TempDir()}}
	for _, name := range []string{"lab", "ops"} {
		room, err := st.CreateRoom(ctx, domain.Room{ID: uuid.New(), Name: name, CreatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.AddAgentToRoom(ctx, room.ID, a.ID, now)
		if err != nil {
			t.Fatal(err)
		}
		session := m.Session.RuntimeSessionID
		alloc, err := st.AllocateHost(ctx, store.AllocateRequest{AgentID: a.ID, TemplateID: tmpl.ID, RuntimeSession: session,
			Placement: shared, Node: "n1", Sandboxed: true, Compatibility: "fp",
			SandboxName: func(h uuid.UUID) string { return activities.SandboxName(a.ID, h) }, At: now})
		if err != nil {
			t.Fatal(err)
		}
		f.host = alloc.Host
		hs, err := st.GetHostSession(ctx, session)
		if err != nil {
			t.Fatal(err)
		}
		if err := activities.ProvisionWorkspace(ctx, st, f.layout, f.host, hs); err != nil {
			t.Fatal(err)
		}
		f.sessions = append(f.sessions, session)
	}
	if f.paths, err = workspace.ManagedPaths(f.layout, f.host.ID); err != nil {
		t.Fatal(err)
	}
	for i, s := range f.sessions {
		f.write(s, "notes.txt", "room "+string(rune('A'+i)))
		f.write(s, "src/main.go", "package main\n")
	}
	return f
}

func (f *opFixture) write(session uuid.UUID, rel, body string) {
	f.t.Helper()
	p := filepath.Join(f.paths.Session(session), rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// stopMembers stands in for the RoomSession stop (a host with no live runtime).
type stopMembers struct{ f *opFixture }

func (s stopMembers) StopMember(_ context.Context, _ string, session uuid.UUID, _ domain.SessionStopReason) (bool, error) {
	s.f.stops = append(s.f.stops, session)
	return false, nil
}
func (stopMembers) RestartMember(context.Context, uuid.UUID) error        { return nil }
func (stopMembers) RetireMember(context.Context, string, uuid.UUID) error { return nil }
func (stopMembers) Wake(context.Context, domain.Binding) error            { return nil }
func (stopMembers) ApplyConfig(context.Context, string, uuid.UUID, int64) (bool, error) {
	return false, nil
}

// settleLeases stands in for the host's settle (its park's checkpoint, done); the archive
// uses no other lease method.
type settleLeases struct {
	contract.HostLeases
	f *opFixture
}

func (l settleLeases) Settle(ctx context.Context, _ string, host uuid.UUID) error {
	exports, err := l.f.st.ListWorkspaceExports(ctx, l.f.sessions[0])
	if err != nil {
		return err
	}
	l.f.settles = append(l.f.settles, settled{host: host, stops: len(l.f.stops), exports: len(exports)})
	return nil
}

// run executes one WorkspaceOp with the real activities; killAfter names an activity whose
// side effect happens and whose answer is lost (a worker killed right after it), failing
// the run as a crash would.
func (f *opFixture) run(in contract.WorkspaceOpInput, killAfter string) (contract.WorkspaceOpResult, error) {
	f.t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	rec := &activities.WorkspaceRecords{Store: f.st}
	w := &activities.Workspaces{Store: f.st, Layout: f.layout, PATH: os.Getenv("PATH")}
	h := &activities.Hosts{Store: f.st, Members: stopMembers{f}, Leases: settleLeases{f: f}}
	env.RegisterActivity(rec)
	env.RegisterActivity(w)
	env.RegisterActivity(h)
	killed := contract.Fail("worker killed", "killed", nil)
	switch killAfter {
	case "StopMember":
		env.OnActivity(h.StopMember, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StopMemberInput) (bool, error) {
			_, _ = stopMembers{f}.StopMember(ctx, "", in.RuntimeSession, in.Reason)
			return false, killed
		})
	case "SettleHost":
		env.OnActivity(h.SettleHost, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.SettleHostInput) error {
			_ = h.SettleHost(ctx, in)
			return killed
		})
	case "MarkDormant":
		env.OnActivity(rec.MarkDormant, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.MarkDormantInput) error {
			_ = rec.MarkDormant(ctx, in)
			return killed
		})
	case "InspectRemoval":
		env.OnActivity(w.InspectRemoval, mock.Anything, mock.Anything).Return(func(ctx context.Context, in contract.WorkspaceRef) (contract.RemovalReport, error) {
			_, _ = w.InspectRemoval(ctx, in)
			return contract.RemovalReport{}, killed
		})
	case "CreateExport":
		env.OnActivity(w.CreateExport, mock.Anything, mock.Anything).Return(func(ctx context.Context, in contract.WorkspaceRef) (domain.WorkspaceExport, error) {
			if _, err := w.CreateExport(ctx, in); err != nil {
				f.t.Error(err)
			}
			return domain.WorkspaceExport{}, killed
		})
	case "RecordExport":
		env.OnActivity(rec.RecordExport, mock.Anything, mock.Anything).Return(func(ctx context.Context, e domain.WorkspaceExport) error {
			if err := rec.RecordExport(ctx, e); err != nil {
				f.t.Error(err)
			}
			return killed
		})
	case "PruneExports":
		env.OnActivity(w.PruneExports, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.PruneExportsInput) (int, error) {
			if _, err := w.PruneExports(ctx, in); err != nil {
				f.t.Error(err)
			}
			return 0, killed
		})
	case "RemoveSessionBytes":
		env.OnActivity(w.RemoveSessionBytes, mock.Anything, mock.Anything).Return(func(ctx context.Context, in contract.WorkspaceRef) error {
			if err := w.RemoveSessionBytes(ctx, in); err != nil {
				f.t.Error(err)
			}
			return killed
		})
	case "ExportBytesRemoved":
		// The export's bytes are gone (the filesystem commit), its record not yet stamped.
		env.OnActivity(w.DeleteExportBytes, mock.Anything, mock.Anything).Return(func(ctx context.Context, in contract.WorkspaceRef) error {
			if err := workspace.NewExports(f.layout).Remove(in.Export); err != nil {
				f.t.Error(err)
			}
			return killed
		})
	case "":
	default:
		f.t.Fatalf("no kill point %q", killAfter)
	}
	env.ExecuteWorkflow(WorkspaceOp, in)
	var out contract.WorkspaceOpResult
	if err := env.GetWorkflowError(); err != nil {
		return out, err
	}
	return out, env.GetWorkflowResult(&out)
}

func (f *opFixture) workspace(id uuid.UUID) domain.ManagedWorkspace {
	f.t.Helper()
	ws, err := f.st.GetManagedWorkspace(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return ws
}

// An archive interrupted after any one of its steps (the step's effect done, its answer
// lost, the run failed) is finished by retry_reconcile from its recorded intent: exactly one
// export kept (keep_latest pruned the older one), holding the workspace's bytes, the live
// bytes removed, the Shared sibling untouched, and the operation's journal only moving
// forward.
func TestArchiveInterruptedAtEachStepFinishesExactlyOnce(t *testing.T) {
	for _, step := range []string{"StopMember", "SettleHost", "MarkDormant", "InspectRemoval", "CreateExport", "RecordExport", "PruneExports", "RemoveSessionBytes"} {
		t.Run(step, func(t *testing.T) {
			ctx := context.Background()
			f := newOpFixture(t)
			target, sibling := f.sessions[0], f.sessions[1]
			older, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionExport}, "")
			if err != nil || older.Export == nil {
				t.Fatalf("first export %+v %v", older, err)
			}
			f.write(target, "notes.txt", "room A, later")
			if _, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionArchive}, step); err == nil {
				t.Fatal("the interrupted run succeeded")
			}
			running, err := f.st.RunningWorkspaceOperation(ctx, target)
			if err != nil || running == nil || running.Kind != domain.WorkspaceOpArchive {
				t.Fatalf("after the crash the archive must still be running: %+v %v", running, err)
			}
			if _, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionExport}, ""); !contract.Is(err, domain.ErrTypeOperationRunning) {
				t.Fatalf("a second operation during the archive: %v", err)
			}
			out, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionRetryReconcile}, "")
			if err != nil {
				t.Fatal(err)
			}
			if !out.Resumed || out.Operation.ID != running.ID || out.Operation.State != domain.OpSucceeded ||
				out.Operation.ResultClass != domain.ResultArchived {
				t.Fatalf("reconcile %+v", out)
			}
			if ws := f.workspace(target); ws.State != domain.WorkspaceArchived {
				t.Fatalf("workspace %s", ws.State)
			}
			if _, err := os.Stat(f.paths.Session(target)); !os.IsNotExist(err) {
				t.Fatalf("live bytes still there: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(f.paths.Session(sibling), "notes.txt")); err != nil || string(b) != "room B" {
				t.Fatalf("sibling touched: %q %v", b, err)
			}
			if f.workspace(sibling).State != domain.WorkspaceReady {
				t.Fatal("sibling state changed")
			}
			exports, err := f.st.ListWorkspaceExports(ctx, target)
			if err != nil {
				t.Fatal(err)
			}
			var kept []domain.WorkspaceExport
			for _, e := range exports {
				if e.DeletedAt == nil {
					kept = append(kept, e)
				}
			}
			if len(kept) != 1 || kept[0].ID == older.Export.ID {
				t.Fatalf("kept exports %+v (older %s)", kept, older.Export.ID)
			}
			ex := workspace.NewExports(f.layout)
			if ok, _ := ex.Exists(older.Export.ID); ok {
				t.Fatal("the pruned export's bytes remain")
			}
			dest := filepath.Join(t.TempDir(), "restored")
			if err := ex.RestoreWorkspace(kept[0].ID, dest); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(dest, "notes.txt")); err != nil || string(b) != "room A, later" {
				t.Fatalf("the export does not hold the archived bytes: %q %v", b, err)
			}
			events, err := f.st.WorkspaceOperationEvents(ctx, running.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(events) != 2 || events[0].State != string(domain.OpRunning) || events[1].State != string(domain.OpSucceeded) {
				t.Fatalf("journal %+v", events)
			}
			if len(f.stops) == 0 || f.stops[0] != target {
				t.Fatalf("stops %v", f.stops)
			}
		})
	}
}

// Removal is blocked by uncommitted work (the workspace is marked removal_blocked, nothing
// is removed and no export made); force_discard archives anyway, the export keeping it.
func TestArchiveBlockedByUncommittedWorkUnlessForced(t *testing.T) {
	if _, err := lookGit(); err != nil {
		t.Skip("git is not installed")
	}
	ctx := context.Background()
	f := newOpFixture(t)
	target := f.sessions[0]
	gitInit(t, filepath.Join(f.paths.Session(target), "repo"))
	f.write(target, "repo/dirty.txt", "not committed")
	out, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionArchive}, "")
	if !contract.Is(err, domain.ErrTypeRemovalBlocked) {
		t.Fatalf("archive of uncommitted work: %+v %v", out, err)
	}
	if ws := f.workspace(target); ws.State != domain.WorkspaceRemovalBlocked {
		t.Fatalf("workspace %s", ws.State)
	}
	if _, err := os.Stat(filepath.Join(f.paths.Session(target), "repo/dirty.txt")); err != nil {
		t.Fatal("a blocked archive removed bytes")
	}
	if exports, _ := f.st.ListWorkspaceExports(ctx, target); len(exports) != 0 {
		t.Fatalf("a blocked archive exported: %+v", exports)
	}
	ops, _ := f.st.ListWorkspaceOperations(ctx, target, 5)
	if len(ops) != 1 || ops[0].State != domain.OpFailed || ops[0].ResultClass != domain.ResultRemovalBlocked {
		t.Fatalf("operations %+v", ops)
	}
	out, err = f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionArchive, ForceDiscard: true}, "")
	if err != nil || out.Operation.ResultClass != domain.ResultArchived || out.Export == nil {
		t.Fatalf("forced archive %+v %v", out, err)
	}
}

// Restore proves ownership, refuses an existing destination, brings back the workspace and
// returns an archived host to parked; export deletion needs its own confirmation and an
// archived workspace.
func TestRestoreAndExportDeletionGuards(t *testing.T) {
	ctx := context.Background()
	f := newOpFixture(t)
	target, sibling := f.sessions[0], f.sessions[1]
	exp, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionExport}, "")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		in   contract.WorkspaceOpInput
		typ  domain.ErrorType
	}{
		{"restore into an existing destination", contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionRestore}, domain.ErrTypeWorkspaceRefused},
		{"delete the only export of an unarchived workspace", contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionDeleteExport,
			ExportID: exp.Export.ID, ConfirmPermanent: true}, domain.ErrTypeWorkspaceRefused},
		{"delete without confirm_permanent", contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionDeleteExport,
			ExportID: exp.Export.ID}, domain.ErrTypeValidation},
		{"restore another workspace's export", contract.WorkspaceOpInput{Workspace: sibling, Action: domain.WorkspaceActionRestore,
			ExportID: exp.Export.ID}, domain.ErrTypeWorkspaceRefused},
	}
	for _, c := range cases {
		if _, err := f.run(c.in, ""); !contract.Is(err, c.typ) {
			t.Fatalf("%s: %v, want %s", c.name, err, c.typ)
		}
	}
	arch, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionArchive, Retention: domain.RetainAll}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetHostState(ctx, f.host.ID, domain.HostParked, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := f.st.MarkHostRemoved(ctx, f.host.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	out, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionRestore}, "")
	if err != nil || out.Operation.Kind != domain.WorkspaceOpReconcile || out.Operation.ResultClass != domain.ResultRestoredExport {
		t.Fatalf("restore %+v %v", out, err)
	}
	if b, err := os.ReadFile(filepath.Join(f.paths.Session(target), "notes.txt")); err != nil || string(b) != "room A" {
		t.Fatalf("restored %q %v", b, err)
	}
	if h, _ := f.st.GetRuntimeHost(ctx, f.host.ID); h.State != domain.HostParked {
		t.Fatalf("host %s after restore", h.State)
	}
	if f.workspace(target).State != domain.WorkspaceReady {
		t.Fatal("restored workspace not ready")
	}
	// Archive again, then delete the first export (keep_all kept it) with confirmation.
	if _, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionArchive, Retention: domain.RetainAll}, ""); err != nil {
		t.Fatal(err)
	}
	del, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionDeleteExport, ExportID: exp.Export.ID, ConfirmPermanent: true}, "")
	if err != nil || del.Operation.Kind != domain.WorkspaceOpRemove || del.Operation.ResultClass != domain.ResultExportDeleted {
		t.Fatalf("delete %+v %v", del, err)
	}
	if e, _ := f.st.GetWorkspaceExport(ctx, exp.Export.ID); e.DeletedAt == nil {
		t.Fatal("deleted export not stamped")
	}
	if e, _ := f.st.GetWorkspaceExport(ctx, arch.Export.ID); e.DeletedAt != nil {
		t.Fatal("another export was deleted")
	}
}

func lookGit() (string, error) { return exec.LookPath("git") }

// gitInit makes a repository with one commit (fixed argv, no shell).
func gitInit(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "README"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "one"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// A session restarted while its archive runs, or after it, does not start in the workspace:
// provisioning refuses while the archive owns the bytes and once they are archived.
func TestASessionDoesNotStartInAWorkspaceBeingArchivedOrArchived(t *testing.T) {
	ctx := context.Background()
	f := newOpFixture(t)
	target := f.sessions[0]
	hs, err := f.st.GetHostSession(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionArchive}, "CreateExport"); err == nil {
		t.Fatal("the interrupted run succeeded")
	}
	if err := activities.ProvisionWorkspace(ctx, f.st, f.layout, f.host, hs); !contract.Is(err, domain.ErrTypeOperationRunning) {
		t.Fatalf("provision during the archive: %v", err)
	}
	if _, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionRetryReconcile}, ""); err != nil {
		t.Fatal(err)
	}
	if err := activities.ProvisionWorkspace(ctx, f.st, f.layout, f.host, hs); !contract.Is(err, domain.ErrTypeWorkspaceArchived) {
		t.Fatalf("provision of an archived workspace: %v", err)
	}
	if _, err := os.Stat(f.paths.Session(target)); !os.IsNotExist(err) {
		t.Fatal("a refused provision recreated the workspace")
	}
}

// An export deletion interrupted after its bytes went (before its record was stamped) is
// finished by retry_reconcile from the export id in its intent: that export, and only it.
func TestAnExportDeletionInterruptedAfterTheFilesystemCommitCompletes(t *testing.T) {
	ctx := context.Background()
	f := newOpFixture(t)
	target := f.sessions[0]
	first, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionExport}, "")
	if err != nil {
		t.Fatal(err)
	}
	arch, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionArchive, Retention: domain.RetainAll}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionDeleteExport, ExportID: first.Export.ID,
		ConfirmPermanent: true}, "ExportBytesRemoved"); err == nil {
		t.Fatal("the interrupted deletion succeeded")
	}
	if e, _ := f.st.GetWorkspaceExport(ctx, first.Export.ID); e.DeletedAt != nil {
		t.Fatal("stamped before the crash")
	}
	out, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionRetryReconcile}, "")
	if err != nil || !out.Resumed || out.Operation.ResultClass != domain.ResultExportDeleted {
		t.Fatalf("reconcile %+v %v", out, err)
	}
	if e, _ := f.st.GetWorkspaceExport(ctx, first.Export.ID); e.DeletedAt == nil {
		t.Fatal("the deletion was not finished")
	}
	if _, err := workspace.NewExports(f.layout).Verify(arch.Export.ID); err != nil {
		t.Fatalf("the other export was touched: %v", err)
	}
}

// The node's own destination check: a restore whose rename landed but whose answer was lost
// is done when retried (the destination holds exactly the export); a destination holding
// anything else is never written over.
func TestRestoreRetriedAfterItsRenameIsDoneAndAForeignDestinationIsRefused(t *testing.T) {
	ctx := context.Background()
	f := newOpFixture(t)
	target := f.sessions[0]
	arch, err := f.run(contract.WorkspaceOpInput{Workspace: target, Action: domain.WorkspaceActionArchive}, "")
	if err != nil {
		t.Fatal(err)
	}
	w := &activities.Workspaces{Store: f.st, Layout: f.layout, PATH: os.Getenv("PATH")}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(w)
	ref := contract.WorkspaceRef{Workspace: target, Host: f.host.ID, Session: target, Export: arch.Export.ID}
	for i := 0; i < 2; i++ { // the second is the retry after a lost answer
		if _, err := env.ExecuteActivity(w.RestoreExport, ref); err != nil {
			t.Fatalf("restore attempt %d: %v", i+1, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(f.paths.Session(target), "notes.txt")); err != nil || string(b) != "room A" {
		t.Fatalf("restored %q %v", b, err)
	}
	f.write(target, "notes.txt", "something else")
	if _, err := env.ExecuteActivity(w.RestoreExport, ref); !contract.Is(err, domain.ErrTypeWorkspaceRefused) {
		t.Fatalf("restore over a foreign destination: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.paths.Session(target), "notes.txt")); string(b) != "something else" {
		t.Fatal("the destination was written over")
	}
	if entries, _ := os.ReadDir(filepath.Join(f.paths.WorkspaceRoot(), "sessions")); len(entries) != 2 {
		t.Fatalf("staging left in the mounted tree: %v", entries)
	}
	_ = ctx
}

// An archive exports only once the host checkpointed what its stopped member wrote: the
// stop releases the host, whose park captures beside the archive, and an export made before
// that capture held an older generation than the one a restore must resume (a flake of
// TestAnArchivedWorkspaceOutlivesItsHostAndIsRestoredWithItsConversation, 2026-12-07).
func TestAnArchiveWaitsForTheHostsCheckpointAfterTheStopBeforeItExports(t *testing.T) {
	f := newOpFixture(t)
	out, err := f.run(contract.WorkspaceOpInput{Workspace: f.sessions[0], Action: domain.WorkspaceActionArchive}, "")
	if err != nil || out.Export == nil {
		t.Fatalf("archive %+v %v", out, err)
	}
	if len(f.settles) != 1 || f.settles[0] != (settled{host: f.host.ID, stops: 1, exports: 0}) {
		t.Fatalf("settles %+v: want one, of host %s, after the stop and before the export", f.settles, f.host.ID)
	}
}
