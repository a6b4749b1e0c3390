package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
)

// flakyMembers fails the first call of every kind (as a worker killed mid-step would), then
// records what it was asked.
type flakyMembers struct {
	mu     sync.Mutex
	failed map[string]bool
	calls  map[string]int
}

var errKilled = errors.New("worker killed mid-step")

func (f *flakyMembers) step(kind string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failed[kind] {
		f.failed[kind] = true
		return errKilled
	}
	f.calls[kind]++
	return nil
}

func (f *flakyMembers) StopMember(context.Context, string, uuid.UUID, domain.SessionStopReason) (bool, error) {
	return false, f.step("stop")
}
func (f *flakyMembers) RestartMember(context.Context, uuid.UUID) error { return f.step("restart") }
func (f *flakyMembers) RetireMember(context.Context, string, uuid.UUID) error {
	return f.step("retire")
}
func (f *flakyMembers) Wake(context.Context, domain.Binding) error { return f.step("wake") }
func (f *flakyMembers) ApplyConfig(context.Context, string, uuid.UUID, int64) (bool, error) {
	return false, f.step("apply")
}

// A start-fresh whose every member step is interrupted once, then run again from the top as
// after a crash, moves the room to exactly one replacement, archives the source once and
// deletes nothing — through the real store.
func TestAContinuityResetInterruptedAtEachStepCompletesExactlyOnce(t *testing.T) {
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
	room, err := st.CreateRoom(ctx, domain.Room{ID: uuid.New(), Name: "lab", CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.AddAgentToRoom(ctx, room.ID, a.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	session := m.Session.RuntimeSessionID
	if err := st.BindProviderSession(ctx, session, "thread-1", "", now); err != nil {
		t.Fatal(err)
	}
	alloc, err := st.AllocateHost(ctx, store.AllocateRequest{AgentID: a.ID, TemplateID: tmpl.ID, RuntimeSession: session,
		Placement: shared, Node: "n1", Sandboxed: true, Compatibility: "fp",
		SandboxName: func(h uuid.UUID) string { return activities.SandboxName(a.ID, h) }, At: now})
	if err != nil {
		t.Fatal(err)
	}
	host := alloc.Host.ID
	members := &flakyMembers{failed: map[string]bool{}, calls: map[string]int{}}
	ck := &activities.Checkpoints{Store: st, Layout: domain.Layout{Root: t.TempDir()}}
	report, err := ck.InspectContinuity(ctx, activities.InspectContinuityInput{Host: host})
	if err != nil || report.Status != domain.ContinuityMissing || !report.CanStartFresh {
		t.Fatalf("inspection %+v %v", report, err)
	}
	run := func() domain.ContinuityReset {
		t.Helper()
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestWorkflowEnvironment()
		env.RegisterActivity(&activities.Hosts{Store: st, Members: members})
		env.RegisterActivity(ck)
		env.ExecuteWorkflow(ContinuityReset, contract.ContinuityResetInput{Host: host, Node: "n1", EvidenceChecksum: report.EvidenceChecksum})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		var out domain.ContinuityReset
		if err := env.GetWorkflowResult(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := run()
	second := run() // the whole workflow again, as after a crash past its last step
	if len(first.Mapping) != 1 || second.ID != first.ID || second.Mapping[0].ReplacementSession != first.Mapping[0].ReplacementSession {
		t.Fatalf("first %+v second %+v", first, second)
	}
	rep := first.Mapping[0].ReplacementSession
	b, err := st.BindingOf(ctx, a.ID, room.ID)
	if err != nil || b.RuntimeSessionID != rep || !b.Active {
		t.Fatalf("room binding %+v %v", b, err)
	}
	if h, _ := st.GetRuntimeHost(ctx, host); h.State != domain.HostArchived {
		t.Fatalf("source host %s", h.State)
	}
	fresh, err := st.GetHostSession(ctx, rep)
	if err != nil || fresh.ProviderSessionID != "" || fresh.Removed {
		t.Fatalf("replacement %+v %v", fresh, err)
	}
	if old, err := st.GetHostSession(ctx, session); err != nil || !old.Removed || old.ProviderSessionID != "thread-1" {
		t.Fatalf("source %+v %v (kept, not deleted)", old, err)
	}
	if members.calls["stop"] < 1 || members.calls["retire"] < 1 || members.calls["wake"] < 1 {
		t.Fatalf("member steps %v", members.calls)
	}
}
