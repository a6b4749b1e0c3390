package sandbox_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/sandbox"
)

type fixture struct {
	m     *sandbox.Manager
	plan  sandbox.Plan
	state string
	log   string
}

// newFixture is a manager over the real driver and a fake sbx with its own state, plus a
// host-owned plan.
func newFixture(t *testing.T, fail string) fixture {
	t.Helper()
	state, log := t.TempDir(), filepath.Join(t.TempDir(), "sbx.log")
	d := newDriver(t, fail, "FAKESBX_STATE="+state, "FAKESBX_LOG="+log)
	if _, err := d.ProbeVersion(context.Background()); err != nil {
		t.Fatal(err)
	}
	agent, host := uuid.New(), uuid.New()
	plan := sandbox.Plan{Owner: sandbox.OwnerKey{Kind: sandbox.OwnerRuntimeHost, AgentID: agent, ID: host},
		Name: sandbox.DeriveName("jam", agent, host), Agent: "shell", Workspace: t.TempDir(), ConfigurationSource: "jam_managed"}
	return fixture{m: &sandbox.Manager{Driver: d, Markers: sandbox.Markers{Dir: filepath.Join(t.TempDir(), "owners")}},
		plan: plan, state: state, log: log}
}

// crashAfterCreate leaves what a worker killed after `sbx create`, before the published
// marker, leaves: the pending intent and a sandbox whose guest holds no nonce.
func (f fixture) crashAfterCreate(t *testing.T) (nonce string, since time.Time) {
	t.Helper()
	nonce, _ = sandbox.NewNonce()
	since = time.Now().UTC()
	if err := f.m.Markers.Write(sandbox.Marker{Plan: f.plan, Nonce: nonce, MCPDigest: sandbox.MCPDigest(f.plan), Pending: true, PendingSince: &since}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Driver.Create(context.Background(), sandbox.CreateSpec{Name: f.plan.Name, Agent: f.plan.Agent, Workspace: f.plan.Workspace}); err != nil {
		t.Fatal(err)
	}
	return nonce, since
}

func (f fixture) calls(t *testing.T, verb string) int {
	t.Helper()
	b, _ := os.ReadFile(f.log)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, verb+" ") {
			n++
		}
	}
	return n
}

func (f fixture) sandboxes(t *testing.T) []sandbox.Sandbox {
	t.Helper()
	list, err := f.m.Driver.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func TestEnsureCreatesOnceAndReusesOnlyWithProof(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "")
	res, err := f.m.Ensure(ctx, f.plan, false)
	if err != nil || !res.Created {
		t.Fatalf("first ensure %+v %v", res, err)
	}
	st, err := os.Stat(filepath.Join(f.m.Markers.(sandbox.Markers).Dir, f.plan.Name+".json"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("host marker %v %v", st, err)
	}
	if res, err = f.m.Ensure(ctx, f.plan, false); err != nil || res.Created || res.Match != sandbox.MatchExact {
		t.Fatalf("reuse %+v %v", res, err)
	}
	if n := f.calls(t, "create"); n != 1 || len(f.sandboxes(t)) != 1 {
		t.Fatalf("created %d times, %d sandboxes", n, len(f.sandboxes(t)))
	}
	// Another plan under the same name is not this sandbox.
	other := f.plan
	other.Kits = []string{"docker/extra"}
	if _, err := f.m.Ensure(ctx, other, false); !errors.Is(err, sandbox.ErrOwnershipMismatch) {
		t.Fatalf("changed plan: %v", err)
	}
}

func TestReuseCleanupAndResetRefuseAGuestWithAnotherNonce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "")
	if _, err := f.m.Ensure(ctx, f.plan, false); err != nil {
		t.Fatal(err)
	}
	// The guest's nonce changes under Jam (a tampering guest).
	tampered := newFixture(t, "nonce")
	tampered.m.Driver.Env = append(tampered.m.Driver.Env, "FAKESBX_STATE="+f.state)
	tampered.m.Markers = f.m.Markers
	if _, err := tampered.m.Ensure(ctx, f.plan, false); !errors.Is(err, sandbox.ErrOwnershipMismatch) {
		t.Fatalf("reuse: %v", err)
	}
	if err := tampered.m.Park(ctx, f.plan.Owner, f.plan.Name); !errors.Is(err, sandbox.ErrOwnershipMismatch) {
		t.Fatalf("park: %v", err)
	}
	if _, err := tampered.m.Remove(ctx, f.plan.Owner, f.plan.Name); !errors.Is(err, sandbox.ErrOwnershipMismatch) {
		t.Fatalf("remove: %v", err)
	}
	// A plan mismatch (another owner naming the same sandbox) is refused too.
	stranger := f.plan.Owner
	stranger.ID = uuid.New()
	if _, err := f.m.Remove(ctx, stranger, f.plan.Name); !errors.Is(err, sandbox.ErrOwnershipMismatch) {
		t.Fatalf("remove by another owner: %v", err)
	}
	if n := f.calls(t, "rm") + tampered.calls(t, "rm") + tampered.calls(t, "stop"); n != 0 {
		t.Fatalf("%d destructive commands ran without proof", n)
	}
	if len(f.sandboxes(t)) != 1 {
		t.Fatal("the sandbox is gone")
	}
}

func TestAForeignSandboxIsNeverAdoptedTouchedOrListed(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "")
	// Someone else made a sandbox with Jam's derived name, and another of their own.
	for _, n := range []string{f.plan.Name, "their-own"} {
		if err := f.m.Driver.Create(ctx, sandbox.CreateSpec{Name: n, Agent: "shell"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.m.Ensure(ctx, f.plan, false); !errors.Is(err, sandbox.ErrOwnershipMismatch) {
		t.Fatalf("adopted: %v", err)
	}
	if _, err := f.m.Remove(ctx, f.plan.Owner, f.plan.Name); !errors.Is(err, sandbox.ErrOwnershipMismatch) {
		t.Fatalf("removed: %v", err)
	}
	inv, err := f.m.Inventory(ctx, map[string]sandbox.HostRef{f.plan.Name: {ID: f.plan.Owner.ID.String(), Name: f.plan.Name, Owner: f.plan.Owner}})
	if err != nil {
		t.Fatal(err)
	}
	if inv.Foreign != 1 || len(inv.Entries) != 1 || inv.Entries[0].Disposition != domain.DispositionPersistedWithoutOwnerMarker {
		t.Fatalf("inventory %+v", inv)
	}
	if f.calls(t, "rm") != 0 || f.calls(t, "stop") != 0 || len(f.sandboxes(t)) != 2 {
		t.Fatal("a foreign sandbox was touched")
	}
}

// A worker killed between `sbx create` and the published marker leaves a pending intent and
// a sandbox whose guest has no nonce: the retry converges on that one sandbox.
func TestACrashBetweenCreateAndMarkerConvergesOnOneSandbox(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "")
	nonce, since := f.crashAfterCreate(t)
	res, err := f.m.Ensure(ctx, f.plan, false)
	if err != nil || !res.Created {
		t.Fatalf("converge %+v %v", res, err)
	}
	mk, err := f.m.Markers.Read(f.plan.Name)
	if err != nil || mk.Pending || mk.Nonce != nonce {
		t.Fatalf("marker %+v %v", mk, err)
	}
	if n := f.calls(t, "create"); n != 1 || len(f.sandboxes(t)) != 1 {
		t.Fatalf("%d creates, %d sandboxes", n, len(f.sandboxes(t)))
	}
	if res, err := f.m.Ensure(ctx, f.plan, false); err != nil || res.Created {
		t.Fatalf("reuse after converging %+v %v", res, err)
	}

	// A crash before Docker made the sandbox: the retry creates it under the same intent.
	g := newFixture(t, "")
	if err := g.m.Markers.Write(sandbox.Marker{Plan: g.plan, Nonce: nonce, Pending: true, PendingSince: &since}); err != nil {
		t.Fatal(err)
	}
	if res, err := g.m.Ensure(ctx, g.plan, false); err != nil || !res.Created || g.calls(t, "create") != 1 {
		t.Fatalf("create after a crash before create %+v %v", res, err)
	}
}

// A pending intent never adopts a sandbox Docker made before the intent was written (someone
// else's, under Jam's name), and a create that failed with nothing made leaves no intent.
func TestAPendingIntentAdoptsOnlyASandboxMadeAfterIt(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "")
	if err := f.m.Driver.Create(ctx, sandbox.CreateSpec{Name: f.plan.Name, Agent: f.plan.Agent}); err != nil {
		t.Fatal(err)
	}
	later := time.Now().UTC().Add(time.Minute)
	nonce, _ := sandbox.NewNonce()
	if err := f.m.Markers.Write(sandbox.Marker{Plan: f.plan, Nonce: nonce, MCPDigest: sandbox.MCPDigest(f.plan), Pending: true, PendingSince: &later}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Ensure(ctx, f.plan, false); !errors.Is(err, sandbox.ErrOwnershipMismatch) {
		t.Fatalf("an older sandbox was adopted: %v", err)
	}
	if f.calls(t, "exec") != 0 {
		t.Fatal("Jam wrote into a sandbox it cannot prove it made")
	}

	g := newFixture(t, "create")
	if _, err := g.m.Ensure(ctx, g.plan, false); err == nil {
		t.Fatal("an injected create failure succeeded")
	}
	if _, err := g.m.Markers.Read(g.plan.Name); !errors.Is(err, sandbox.ErrNoMarker) {
		t.Fatalf("a void intent was kept: %v", err)
	}
}

func TestAMarkerThatCannotBePublishedRemovesTheNewSandbox(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "")
	// The sandbox was created under a pending intent; then the finished marker cannot be
	// published (a full disk, say).
	f.crashAfterCreate(t)
	f.m.Markers = failingWrites{f.m.Markers}
	if _, err := f.m.Ensure(ctx, f.plan, false); err == nil {
		t.Fatal("ensure succeeded without a published marker")
	}
	if len(f.sandboxes(t)) != 0 || f.calls(t, "rm") != 1 {
		t.Fatalf("the unprovable sandbox was left: %+v", f.sandboxes(t))
	}
}

// failingWrites is the real marker store whose writes fail.
type failingWrites struct{ sandbox.MarkerStore }

func (failingWrites) Write(sandbox.Marker) error { return errors.New("no space left on device") }

// A running sandbox that no member holds is an orphan of a crash: fencing verifies it and
// stops it (killing what runs in it) before anything new starts.
func TestFencingStopsAnOrphanedSandboxBeforeReuse(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "")
	if _, err := f.m.Ensure(ctx, f.plan, false); err != nil {
		t.Fatal(err)
	}
	argv, err := f.m.Driver.ExecArgs(f.plan.Name, "", "", nil, []string{"sleep", "60"})
	if err != nil {
		t.Fatal(err)
	}
	orphan := exec.Command(argv[0], argv[1:]...)
	orphan.Env = f.m.Driver.Env
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- orphan.Wait() }()
	time.Sleep(300 * time.Millisecond)
	res, err := f.m.Ensure(ctx, f.plan, true)
	if err != nil || !res.Fenced {
		t.Fatalf("fence %+v %v", res, err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = orphan.Process.Signal(syscall.SIGKILL)
		t.Fatal("the orphan still runs after fencing")
	}
	if f.calls(t, "stop") != 1 {
		t.Fatal("fencing did not stop the sandbox")
	}
}

func TestRemovingAnAbsentSandboxDropsOnlyItsMarker(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "")
	if _, err := f.m.Ensure(ctx, f.plan, false); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Driver.Remove(ctx, f.plan.Name); err != nil { // Docker lost it
		t.Fatal(err)
	}
	if removed, err := f.m.Remove(ctx, f.plan.Owner, f.plan.Name); err != nil || removed {
		t.Fatalf("remove %v %v", removed, err)
	}
	if _, err := f.m.Markers.Read(f.plan.Name); !errors.Is(err, sandbox.ErrNoMarker) {
		t.Fatalf("marker left: %v", err)
	}
}

func TestNetworkPolicyAndServiceSecretsGoThroughTheDriver(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, "noise", "FAKESBX_STORED_SERVICES=global:openai,jam-x:anthropic")
	if _, err := d.ProbeVersion(ctx); err != nil {
		t.Fatal(err)
	}
	name := sandbox.DeriveName("jam", uuid.New(), uuid.New())
	if err := d.Create(ctx, sandbox.CreateSpec{Name: name, Agent: "shell"}); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.PolicyCheckNetwork(ctx, name, "api.openai.com"); err != nil || ok {
		t.Fatalf("before allow: %v %v", ok, err)
	}
	if err := d.PolicyAllowNetwork(ctx, name, []string{"api.openai.com", "github.com:443"}); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.PolicyCheckNetwork(ctx, name, "github.com:443"); err != nil || !ok {
		t.Fatalf("after allow: %v %v", ok, err)
	}
	if err := d.PolicyRemoveNetwork(ctx, name, "github.com:443"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := d.PolicyCheckNetwork(ctx, name, "github.com:443"); ok {
		t.Fatal("the removed rule still allows")
	}
	for _, bad := range []string{"--all", "a b", "", "x;rm"} {
		if err := d.PolicyAllowNetwork(ctx, name, []string{bad}); err == nil {
			t.Errorf("target %q reached sbx", bad)
		}
	}
	// Only a global row counts; a sandbox-scoped secret for another service does not.
	if ok, err := d.HasGlobalServiceSecret(ctx, "openai"); err != nil || !ok {
		t.Fatalf("openai: %v %v", ok, err)
	}
	if ok, err := d.HasGlobalServiceSecret(ctx, "anthropic"); err != nil || ok {
		t.Fatalf("anthropic: %v %v", ok, err)
	}
}
