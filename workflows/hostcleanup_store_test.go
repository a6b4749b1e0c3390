package workflows

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/workspace"
)

// cleanupFixture is an opFixture whose Shared host has a real (fake-sbx) sandbox, parked,
// with both members dormant.
type cleanupFixture struct {
	*opFixture
	sb   *activities.Sandbox
	live map[uuid.UUID]bool
}

func newCleanupFixture(t *testing.T) *cleanupFixture {
	t.Helper()
	ctx := context.Background()
	f := &cleanupFixture{opFixture: newOpFixture(t), live: map[uuid.UUID]bool{}}
	f.sb = &activities.Sandbox{Sbx: fakesbx.Binary(t), Env: fakesbx.Env(t, ""), Store: f.st, Layout: f.layout}
	if _, err := f.sb.EnsureSandbox(ctx, activities.EnsureSandboxInput{Host: f.host.ID, Session: f.sessions[0]}); err != nil {
		t.Fatal(err)
	}
	if err := f.sb.ParkSandbox(ctx, activities.HostSandboxInput{Host: f.host.ID}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetHostState(ctx, f.host.ID, domain.HostParked, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, s := range f.sessions {
		if err := f.st.SetMembershipState(ctx, s, domain.MembershipDormant, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if h, err := f.st.GetRuntimeHost(ctx, f.host.ID); err == nil {
		f.host = h
	}
	return f
}

func (f *cleanupFixture) workspaces() *activities.Workspaces {
	return &activities.Workspaces{Store: f.st, Layout: f.layout, Sandbox: f.sb, PATH: os.Getenv("PATH"), Live: func(s uuid.UUID) bool { return f.live[s] }}
}

func (f *cleanupFixture) inspect() contract.CleanupReport {
	f.t.Helper()
	rep, err := f.workspaces().InspectCleanup(context.Background(), activities.HostRef{Host: f.host.ID})
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

func (f *cleanupFixture) archiveAll() {
	f.t.Helper()
	for _, s := range f.sessions {
		if _, err := f.run(contract.WorkspaceOpInput{Workspace: s, Action: domain.WorkspaceActionArchive}, ""); err != nil {
			f.t.Fatal(err)
		}
	}
}

// cleanup runs HostCleanup with the real activities; killAfter names an activity whose
// effect happens and whose answer is lost.
func (f *cleanupFixture) cleanup(killAfter string) (contract.HostCleanupResult, error) {
	f.t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	rec := &activities.WorkspaceRecords{Store: f.st}
	w := f.workspaces()
	env.RegisterActivity(rec)
	env.RegisterActivity(w)
	env.RegisterActivity(f.sb)
	killed := contract.Fail("worker killed", "killed", nil)
	switch {
	case killAfter == "RemoveSandbox":
		env.OnActivity(f.sb.RemoveSandbox, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.HostSandboxInput) (activities.RemoveSandboxResult, error) {
			if _, err := f.sb.RemoveSandbox(ctx, in); err != nil {
				f.t.Error(err)
			}
			return activities.RemoveSandboxResult{}, killed
		})
	case killAfter == "RemoveHostRoot":
		env.OnActivity(w.RemoveHostRoot, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.RemoveHostRootInput) (int64, error) {
			if _, err := w.RemoveHostRoot(ctx, in); err != nil {
				f.t.Error(err)
			}
			return 0, killed
		})
	case strings.HasPrefix(killAfter, "stage:"):
		stage := domain.CleanupStage(strings.TrimPrefix(killAfter, "stage:"))
		env.OnActivity(rec.WriteCleanupStage, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.CleanupStageInput) (domain.HostCleanupOperation, error) {
			op, err := rec.WriteCleanupStage(ctx, in)
			if err == nil && in.Stage == stage {
				return op, killed
			}
			return op, err
		})
	}
	env.ExecuteWorkflow(HostCleanup, contract.HostCleanupInput{Host: f.host.ID, Node: "n1", ConfirmPermanent: true})
	var out contract.HostCleanupResult
	if err := env.GetWorkflowError(); err != nil {
		return out, err
	}
	return out, env.GetWorkflowResult(&out)
}

// The preflight maps the complete Shared scope: every member needs preservation (an
// archived workspace with an export that verifies), a live member blocks, and so does an
// unavailable inventory (never taken for absence).
func TestHostCleanupPreflightRequiresEveryMemberPreservedAndBlocksLiveMembers(t *testing.T) {
	f := newCleanupFixture(t)
	rep := f.inspect()
	for _, s := range f.sessions {
		if !slices.ContainsFunc(rep.Blockers, func(b string) bool { return strings.Contains(b, s.String()) }) {
			t.Fatalf("member %s unpreserved but not a blocker: %v", s, rep.Blockers)
		}
	}
	if len(rep.Members) != 2 || !rep.Members[0].NeedsPreserving || rep.Sandbox.Status != domain.SandboxStopped {
		t.Fatalf("report %+v", rep)
	}
	if _, err := f.run(contract.WorkspaceOpInput{Workspace: f.sessions[0], Action: domain.WorkspaceActionArchive}, ""); err != nil {
		t.Fatal(err)
	}
	rep = f.inspect()
	if slices.ContainsFunc(rep.Blockers, func(b string) bool { return strings.Contains(b, f.sessions[0].String()) }) ||
		!slices.ContainsFunc(rep.Blockers, func(b string) bool { return strings.Contains(b, f.sessions[1].String()) }) {
		t.Fatalf("after archiving one member only the other blocks: %v", rep.Blockers)
	}
	if _, err := f.run(contract.WorkspaceOpInput{Workspace: f.sessions[1], Action: domain.WorkspaceActionArchive}, ""); err != nil {
		t.Fatal(err)
	}
	if rep = f.inspect(); len(rep.Blockers) != 0 || rep.RetainedExportBytes == 0 || rep.PlannedRuntimeHostBytes == 0 {
		t.Fatalf("preserved host still blocked: %+v", rep)
	}
	f.live[f.sessions[1]] = true
	if rep = f.inspect(); len(rep.Blockers) != 1 || !strings.Contains(rep.Blockers[0], "live runtime") {
		t.Fatalf("live member: %v", rep.Blockers)
	}
	f.live[f.sessions[1]] = false
	f.sb.Sbx = "/nonexistent/sbx"
	if rep = f.inspect(); rep.Sandbox.Unavailable == "" || rep.Sandbox.Absent || len(rep.Blockers) != 1 {
		t.Fatalf("unavailable inventory: %+v", rep)
	}
	if _, err := f.cleanup(""); !contract.Is(err, domain.ErrTypeCleanupBlocked) {
		t.Fatalf("cleanup over an unavailable inventory: %v", err)
	}
	if _, err := os.Stat(f.paths.Root); err != nil {
		t.Fatal("a blocked cleanup removed the root")
	}
}

// A cleanup interrupted after each step (the effect done, its answer lost) completes exactly
// once when run again: sandbox gone, root gone, host removed, exports kept, the stages
// journaled forward only.
func TestHostCleanupInterruptedAtEachStageCompletesExactlyOnce(t *testing.T) {
	for _, kill := range []string{"stage:prepared", "RemoveSandbox", "stage:sandbox_removed", "RemoveHostRoot", "stage:root_removed", "stage:succeeded"} {
		t.Run(kill, func(t *testing.T) {
			ctx := context.Background()
			f := newCleanupFixture(t)
			f.archiveAll()
			if _, err := f.cleanup(kill); err == nil {
				t.Fatal("the interrupted run succeeded")
			}
			out, err := f.cleanup("")
			if err != nil {
				t.Fatal(err)
			}
			if out.Cleanup.Stage != domain.CleanupSucceeded || out.Cleanup.RemovedRuntimeHostBytes == 0 ||
				out.Cleanup.RetainedExportBytes == 0 || out.Cleanup.PlannedRuntimeHostBytes == 0 {
				t.Fatalf("cleanup %+v", out.Cleanup)
			}
			if h, _ := f.st.GetRuntimeHost(ctx, f.host.ID); h.State != domain.HostRemoved {
				t.Fatalf("host %s", h.State)
			}
			if _, err := os.Stat(f.paths.Root); !os.IsNotExist(err) {
				t.Fatalf("root remains: %v", err)
			}
			inv, err := f.sb.SandboxInventory(ctx, activities.SandboxInventoryInput{})
			if err != nil || len(inv.Entries) != 0 {
				t.Fatalf("inventory after cleanup %+v %v", inv, err)
			}
			exports, _ := f.st.ListHostExports(ctx, f.host.ID)
			ex := workspace.NewExports(f.layout)
			for _, e := range exports {
				if _, err := ex.Verify(e.ID); err != nil || e.DeletedAt != nil {
					t.Fatalf("export %s not retained: %v", e.ID, err)
				}
			}
			events, err := f.st.HostCleanupEvents(ctx, out.Cleanup.ID)
			if err != nil {
				t.Fatal(err)
			}
			var stages []string
			for _, e := range events {
				stages = append(stages, e.State)
			}
			if want := []string{"prepared", "sandbox_removed", "root_removed", "succeeded"}; !slices.Equal(stages, want) {
				t.Fatalf("journal %v, want %v", stages, want)
			}
			again, err := f.cleanup("")
			if err != nil || again.Cleanup.ID != out.Cleanup.ID {
				t.Fatalf("a finished cleanup asked again: %+v %v", again, err)
			}
		})
	}
}

// A sandbox Docker no longer has (verified absent by the inventory) counts as removed.
func TestHostCleanupTreatsAVerifiedAbsentSandboxAsRemoved(t *testing.T) {
	ctx := context.Background()
	f := newCleanupFixture(t)
	f.archiveAll()
	d, err := f.sb.Driver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(ctx, f.host.SandboxName); err != nil {
		t.Fatal(err)
	}
	rep := f.inspect()
	if !rep.Sandbox.Absent || len(rep.Blockers) != 0 {
		t.Fatalf("absent sandbox: %+v", rep)
	}
	out, err := f.cleanup("")
	if err != nil || out.Cleanup.Stage != domain.CleanupSucceeded {
		t.Fatalf("cleanup %+v %v", out, err)
	}
}

// Cleanup needs its own confirmation.
func TestHostCleanupWithoutConfirmationIsRefused(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.ExecuteWorkflow(HostCleanup, contract.HostCleanupInput{Host: uuid.New(), Node: "n1"})
	if err := env.GetWorkflowError(); !contract.Is(err, domain.ErrTypeValidation) {
		t.Fatalf("%v", err)
	}
}

// Prepared takes the host out of service: while the cleanup is unfinished nothing starts on
// it and no restore revives it; once it finished, a restore revives it and a later cleanup
// is a new one.
func TestAHostUnderCleanupStartsNothingAndARevivedHostIsCleanedAgain(t *testing.T) {
	ctx := context.Background()
	f := newCleanupFixture(t)
	f.archiveAll()
	if _, err := f.cleanup("stage:prepared"); err == nil {
		t.Fatal("the interrupted run succeeded")
	}
	if h, _ := f.st.GetRuntimeHost(ctx, f.host.ID); h.State != domain.HostArchived {
		t.Fatalf("host %s under cleanup", h.State)
	}
	if _, err := f.run(contract.WorkspaceOpInput{Workspace: f.sessions[0], Action: domain.WorkspaceActionRestore}, ""); !contract.Is(err, domain.ErrTypeWorkspaceRefused) {
		t.Fatalf("restore during the cleanup: %v", err)
	}
	if _, err := f.sb.EnsureSandbox(ctx, activities.EnsureSandboxInput{Host: f.host.ID, Session: f.sessions[1]}); err == nil {
		t.Fatal("a sandbox started on a host under cleanup")
	}
	first, err := f.cleanup("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.run(contract.WorkspaceOpInput{Workspace: f.sessions[0], Action: domain.WorkspaceActionRestore}, ""); err != nil {
		t.Fatal(err)
	}
	if h, _ := f.st.GetRuntimeHost(ctx, f.host.ID); h.State != domain.HostParked {
		t.Fatalf("revived host %s", h.State)
	}
	if rep := f.inspect(); len(rep.Blockers) == 0 {
		t.Fatal("a restored, unarchived workspace does not block cleanup")
	}
	if _, err := f.run(contract.WorkspaceOpInput{Workspace: f.sessions[0], Action: domain.WorkspaceActionArchive}, ""); err != nil {
		t.Fatal(err)
	}
	second, err := f.cleanup("")
	if err != nil || second.Cleanup.ID == first.Cleanup.ID || second.Cleanup.Stage != domain.CleanupSucceeded {
		t.Fatalf("second cleanup %+v (first %s) %v", second.Cleanup, first.Cleanup.ID, err)
	}
}

// A workspace archived by its records only (as a continuity reset does) still holds live
// bytes no export has: cleanup blocks until an archive puts them in an export.
func TestCleanupBlocksOnLiveBytesOfAWorkspaceArchivedByRecordOnly(t *testing.T) {
	ctx := context.Background()
	f := newCleanupFixture(t)
	if _, err := f.run(contract.WorkspaceOpInput{Workspace: f.sessions[0], Action: domain.WorkspaceActionExport}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.run(contract.WorkspaceOpInput{Workspace: f.sessions[1], Action: domain.WorkspaceActionArchive}, ""); err != nil {
		t.Fatal(err)
	}
	f.write(f.sessions[0], "notes.txt", "work after the export")
	if err := f.st.SetWorkspaceState(ctx, f.sessions[0], domain.WorkspaceArchived, time.Now()); err != nil {
		t.Fatal(err)
	}
	rep := f.inspect()
	if len(rep.Blockers) != 1 || !strings.Contains(rep.Blockers[0], "live bytes") {
		t.Fatalf("blockers %v", rep.Blockers)
	}
	if _, err := f.run(contract.WorkspaceOpInput{Workspace: f.sessions[0], Action: domain.WorkspaceActionArchive}, ""); err != nil {
		t.Fatal(err)
	}
	if rep = f.inspect(); len(rep.Blockers) != 0 {
		t.Fatalf("blockers after archiving %v", rep.Blockers)
	}
}
