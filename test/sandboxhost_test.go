package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// sandboxEnv is a jam dev whose node drives the fake sbx (state and command log in dirs).
type sandboxEnv struct {
	d                *devInstance
	home, state, log string
	agentState       string
}

func startSandboxDev(t *testing.T) sandboxEnv {
	t.Helper()
	e := sandboxEnv{home: filepath.Join(t.TempDir(), "jam-home"), state: t.TempDir(),
		log: filepath.Join(t.TempDir(), "sbx.log"), agentState: t.TempDir()}
	e.d = startDevEnv(t, e.home, ownedEnv(t, e.agentState, "JAM_SBX="+fakesbx.Binary(t),
		"FAKESBX_STATE="+e.state, "FAKESBX_LOG="+e.log, "TEST_GUEST_VALUE=from-the-host"))
	return e
}

// sbx runs the fake sbx against the environment's state, as an operator at a shell would.
func (e sandboxEnv) sbx(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(fakesbx.Binary(t), args...)
	cmd.Env = []string{"FAKESBX_STATE=" + e.state, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbx %v: %v\n%s", args, err, out)
	}
	return string(out)
}

type fakeSandbox struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

func (e sandboxEnv) sandboxes(t *testing.T) map[string]string {
	t.Helper()
	var out struct {
		Sandboxes []fakeSandbox `json:"sandboxes"`
	}
	if err := json.Unmarshal([]byte(e.sbx(t, "ls", "--json")), &out); err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, s := range out.Sandboxes {
		m[s.Name] = s.Status
	}
	return m
}

// commands counts the logged sbx invocations of verb naming sandbox ("" = any).
func (e sandboxEnv) commands(t *testing.T, verb, sandbox string) int {
	t.Helper()
	b, _ := os.ReadFile(e.log)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == verb && (sandbox == "" || strings.Contains(" "+line+" ", " "+sandbox+" ")) {
			n++
		}
	}
	return n
}

// sandboxedAgent creates an owned agent whose default template runs the test agent (as a
// Cursor ACP runtime) in a sandbox with the given placement.
func sandboxedAgent(t *testing.T, c *client.Client, name string, placement domain.Placement) uuid.UUID {
	t.Helper()
	tmpl := domain.TemplateConfig{Alias: "default", Transport: domain.TransportCursorACP, Command: testagent.Binary(t),
		Args: []string{}, EnvAllowlist: []string{"TEST_GUEST_VALUE"}, Placement: &placement,
		Sandbox: domain.SandboxConfig{Enabled: true}}
	var a api.AgentBody
	must(t, c.Do(context.Background(), http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: name, Kind: domain.AgentOwned, Template: &tmpl}, &a))
	return a.ID
}

func hostsOf(t *testing.T, c *client.Client, agent uuid.UUID) []api.HostBody {
	t.Helper()
	var l api.HostList
	must(t, c.Do(context.Background(), http.MethodGet, "/v1/hosts?agent="+agent.String(), nil, &l))
	return l.Items
}

func control(t *testing.T, c *client.Client, host uuid.UUID, action domain.HostAction) api.HostControlResult {
	t.Helper()
	var res api.HostControlResult
	must(t, c.Operation(context.Background(), http.MethodPost, "/v1/hosts/"+host.String()+"/control", api.HostControlRequest{Action: action}, &res, nil))
	return res
}

func memberStates(h api.HostBody) map[uuid.UUID]domain.MembershipState {
	m := map[uuid.UUID]domain.MembershipState{}
	for _, mb := range h.Members {
		m[mb.RuntimeSessionID] = mb.State
	}
	return m
}

// Two rooms of a Shared agent run in one verified sandbox; the provider gets only its
// allowlisted values; host controls act on every member from the durable membership, never on
// another agent's Dedicated host, and never on a foreign sandbox.
func TestASharedHostServesTwoRoomsAndItsControlsActOnEveryMember(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := startSandboxDev(t)
	c := e.d.client
	e.sbx(t, "create", "--name", "their-own", "shell") // an operator's own sandbox

	agent := sandboxedAgent(t, c, "shared", domain.PlacementShared)
	room1, s1 := roomWith(t, c, "one", agent)
	room2, s2 := roomWith(t, c, "two", agent)
	for _, room := range []uuid.UUID{room1.ID, room2.ID} {
		r := awaitReply(t, c, postText(t, c, room, "[[env TEST_GUEST_VALUE]] [[env JAM_JAM_TESTAGENT_BIN]] [[env CURSOR_CONFIG_DIR]] [[count]] hi"), 60*time.Second)
		// Cursor keeps its chats in CURSOR_CONFIG_DIR: pointed into the provider-state mount.
		if !strings.Contains(r.Text, "env TEST_GUEST_VALUE=from-the-host") || !strings.Contains(r.Text, "env JAM_JAM_TESTAGENT_BIN=(unset)") ||
			!strings.Contains(r.Text, "/provider-state/cursor") {
			t.Fatalf("the guest's environment: %q", r.Text)
		}
	}
	hosts := hostsOf(t, c, agent)
	if len(hosts) != 1 || hosts[0].Placement != domain.PlacementShared || hosts[0].State != domain.HostActive || len(hosts[0].Members) != 2 {
		t.Fatalf("hosts %+v", hosts)
	}
	host := hosts[0]
	for _, s := range []uuid.UUID{s1, s2} {
		if got := getSession(t, c, s); got.Runtime == nil || got.Runtime.Host == nil || *got.Runtime.Host != host.ID || got.Runtime.Sandbox != host.SandboxName {
			t.Fatalf("session %s runtime %+v", s, got.Runtime)
		}
	}
	if sbs := e.sandboxes(t); len(sbs) != 2 || sbs[host.SandboxName] != "running" || e.commands(t, "create", host.SandboxName) != 1 {
		t.Fatalf("sandboxes %v, %d creates", sbs, e.commands(t, "create", host.SandboxName))
	}
	marker := filepath.Join(e.home, "cfg", "sandbox-owners", host.SandboxName+".json")
	if st, err := os.Stat(marker); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("owner marker %v %v", st, err)
	}
	if left, _ := filepath.Glob(filepath.Join(e.home, "cfg", "runtime-env", "*")); len(left) != 0 {
		t.Fatalf("env files outlived the spawn: %v", left)
	}

	// Another agent's Dedicated host, live throughout.
	other := sandboxedAgent(t, c, "dedicated", domain.PlacementDedicated)
	room3, s3 := roomWith(t, c, "three", other)
	awaitReply(t, c, postText(t, c, room3.ID, "hello"), 60*time.Second)
	otherPID := runtimeOf(t, getSession(t, c, s3)).PID

	// Stop: every member down and dormant, the sandbox parked.
	res := control(t, c, host.ID, domain.HostStop)
	if len(res.Members) != 2 || !res.Members[0].WasLive || !res.Members[1].WasLive {
		t.Fatalf("stop %+v", res)
	}
	got := hostsOf(t, c, agent)[0]
	if got.State != domain.HostParked || memberStates(got)[s1] != domain.MembershipDormant || memberStates(got)[s2] != domain.MembershipDormant {
		t.Fatalf("after stop %+v", got)
	}
	for _, s := range []uuid.UUID{s1, s2} {
		awaitPresence(t, c, s, domain.PresenceDormant, 10*time.Second)
	}
	if e.sandboxes(t)[host.SandboxName] != "stopped" {
		t.Fatalf("sandbox after stop: %v", e.sandboxes(t))
	}
	// With every member stopped the host captured its provider state (the test agent's
	// sessions, in the provider-state mount) before parking.
	var cps api.CheckpointList
	must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+host.ID.String()+"/checkpoints", nil, &cps))
	if len(cps.Items) != 1 || cps.Items[0].Reason != domain.CheckpointBeforeStop || cps.Items[0].PayloadBytes == 0 || len(cps.Items[0].Sessions) != 2 {
		t.Fatalf("checkpoints after stop %+v", cps.Items)
	}
	complete := filepath.Join(e.home, "runtime-hosts", host.ID.String(), "checkpoints", cps.Items[0].ID.String(), "complete.json")
	if st, err := os.Stat(complete); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("published manifest %v %v", st, err)
	}

	// A message wakes one room; restart brings back only the live member.
	awaitReply(t, c, postText(t, c, room1.ID, "back?"), 60*time.Second)
	res = control(t, c, host.ID, domain.HostRestart)
	live := map[uuid.UUID]api.HostControlMember{}
	for _, m := range res.Members {
		live[m.RuntimeSession] = m
	}
	if !live[s1].WasLive || !live[s1].Restarted || live[s2].WasLive || live[s2].Restarted {
		t.Fatalf("restart %+v", res)
	}
	awaitPresence(t, c, s1, domain.PresenceLive, 60*time.Second)
	if p := getSession(t, c, s2).Presence; p != domain.PresenceDormant {
		t.Fatalf("a dormant member came back: %s", p)
	}

	// Reset: every member quiesced, the sandbox destroyed once, then recreated for the live one.
	nonceBefore, _ := os.ReadFile(marker)
	res = control(t, c, host.ID, domain.HostResetSandbox)
	if !res.SandboxDestroyed || e.commands(t, "rm", host.SandboxName) != 1 {
		t.Fatalf("reset %+v, %d rm", res, e.commands(t, "rm", host.SandboxName))
	}
	awaitPresence(t, c, s1, domain.PresenceLive, 60*time.Second)
	awaitReply(t, c, postText(t, c, room1.ID, "fresh sandbox"), 60*time.Second)
	if n := e.commands(t, "create", host.SandboxName); n != 2 {
		t.Fatalf("%d creates after reset", n)
	}
	if nonceAfter, _ := os.ReadFile(marker); string(nonceAfter) == string(nonceBefore) {
		t.Fatal("the recreated sandbox kept the old evidence")
	}
	must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+host.ID.String()+"/checkpoints", nil, &cps))
	if len(cps.Items) < 3 || cps.Items[0].Reason != domain.CheckpointBeforeReset {
		t.Fatalf("checkpoints after reset %+v", cps.Items)
	}
	// The provider state survived the destroyed microVM: the room's conversation goes on.
	if r := awaitReply(t, c, postText(t, c, room1.ID, "[[count]]"), 60*time.Second); !strings.Contains(r.Text, "turns remembered: 3") {
		t.Fatalf("after reset: %q", r.Text)
	}

	// The other agent's Dedicated host and the operator's own sandbox were never touched.
	if pid := runtimeOf(t, getSession(t, c, s3)).PID; pid != otherPID {
		t.Fatalf("the other agent's runtime was restarted: %d -> %d", otherPID, pid)
	}
	otherHost := hostsOf(t, c, other)[0]
	if otherHost.ID != s3 || otherHost.Placement != domain.PlacementDedicated {
		t.Fatalf("dedicated host %+v", otherHost)
	}
	for _, name := range []string{"their-own", otherHost.SandboxName} {
		if n := e.commands(t, "stop", name) + e.commands(t, "rm", name); n != 0 {
			t.Fatalf("%s was stopped or removed %d times", name, n)
		}
	}

	// The inventory lists Jam's sandboxes and only counts the foreign one.
	var inv api.SandboxInventoryBody
	must(t, c.Do(ctx, http.MethodGet, "/v1/sandbox/inventory", nil, &inv))
	if inv.Inventory.Foreign != 1 || len(inv.Inventory.Entries) != 2 {
		t.Fatalf("inventory %+v", inv)
	}
	for _, en := range inv.Inventory.Entries {
		if en.Disposition != domain.DispositionHealthy || en.Name == "their-own" {
			t.Fatalf("inventory entry %+v", en)
		}
	}
	var one api.HostBody
	must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+host.ID.String(), nil, &one))
	if one.Lease == nil || len(one.Lease.Leases) != 1 || one.Lease.Leases[0] != s1 || !one.Lease.Ready {
		t.Fatalf("host lease %+v", one.Lease)
	}
	if err := c.Operation(ctx, http.MethodPost, "/v1/hosts/"+host.ID.String()+"/control", map[string]string{"action": "explode"}, nil, nil); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("a bad action: %v", err)
	}
	// A room may not reset a sandbox that serves other rooms.
	if err := c.Operation(ctx, http.MethodPost, "/v1/sessions/"+s2.String()+"/reset-sandbox", nil, nil, nil); !isStatus(err, http.StatusConflict) {
		t.Fatalf("room-scoped reset of a Shared host: %v", err)
	}
	cli := []string{"JAM_URL=" + e.d.apiURL, "JAM_HOME=" + filepath.Dir(e.d.tokenFile)}
	if out, err := runJam(t, cli, "host", "list", "--agent", agent.String()); err != nil || !strings.Contains(out, host.SandboxName) {
		t.Fatalf("jam host list: %v\n%s", err, out)
	}
	if out, err := runJam(t, cli, "host", "control", host.ID.String(), "stop"); err != nil || !strings.Contains(out, "stop: 2 member(s)") {
		t.Fatalf("jam host control: %v\n%s", err, out)
	}
	awaitPresence(t, c, s1, domain.PresenceDormant, 10*time.Second)
}

// Dedicated placement gives every session its own host (named after the session) and its own
// sandbox; a stopped session releases its lease and its host parks the sandbox; a room may
// reset its own Dedicated sandbox.
func TestDedicatedHostsAreIsolatedPerSessionAndParkWhenIdle(t *testing.T) {
	t.Parallel()
	e := startSandboxDev(t)
	c := e.d.client
	agent := sandboxedAgent(t, c, "solo", domain.PlacementDedicated)
	room1, s1 := roomWith(t, c, "one", agent)
	room2, s2 := roomWith(t, c, "two", agent)
	awaitReply(t, c, postText(t, c, room1.ID, "a"), 60*time.Second)
	awaitReply(t, c, postText(t, c, room2.ID, "b"), 60*time.Second)
	hosts := hostsOf(t, c, agent)
	ids := map[uuid.UUID]api.HostBody{}
	for _, h := range hosts {
		ids[h.ID] = h
	}
	if len(hosts) != 2 || ids[s1].SandboxName == "" || ids[s2].SandboxName == "" || ids[s1].SandboxName == ids[s2].SandboxName {
		t.Fatalf("hosts %+v", hosts)
	}
	if sbs := e.sandboxes(t); len(sbs) != 2 {
		t.Fatalf("sandboxes %v", sbs)
	}
	// Session-scope stop releases the lease; the last release parks the sandbox.
	must(t, c.Do(context.Background(), http.MethodPost, "/v1/sessions/"+s1.String()+"/stop", nil, nil))
	deadline := time.Now().Add(20 * time.Second)
	wait.Eventually(t, time.Until(deadline), func() error {
		if sbs := e.sandboxes(t); sbs[ids[s1].SandboxName] != "stopped" {
			return fmt.Errorf("sandboxes %v", sbs)
		}
		return nil
	}, "the released host to park")
	if e.sandboxes(t)[ids[s2].SandboxName] != "running" {
		t.Fatal("parking one session's host touched the other's")
	}
	wait.Eventually(t, time.Until(deadline), func() error {
		var x api.HostBody
		must(t, c.Do(context.Background(), http.MethodGet, "/v1/hosts/"+s1.String(), nil, &x))
		if x.State == domain.HostParked && memberStates(x)[s1] == domain.MembershipDormant && x.Lease != nil && len(x.Lease.Leases) == 0 {
			return nil
		}
		return fmt.Errorf("host %+v lease %+v", x, x.Lease)
	}, "the parked host, dormant and without leases")

	// Room-scoped reset of the live Dedicated session: destroyed once, back in a new one.
	var res api.HostControlResult
	must(t, c.Operation(context.Background(), http.MethodPost, "/v1/sessions/"+s2.String()+"/reset-sandbox", nil, &res, nil))
	if !res.SandboxDestroyed || len(res.Members) != 1 || !res.Members[0].WasLive || e.commands(t, "rm", ids[s2].SandboxName) != 1 {
		t.Fatalf("reset %+v", res)
	}
	awaitPresence(t, c, s2, domain.PresenceLive, 60*time.Second)
	if n := e.commands(t, "create", ids[s2].SandboxName); n != 2 {
		t.Fatalf("%d creates", n)
	}
	if e.commands(t, "rm", ids[s1].SandboxName) != 0 {
		t.Fatal("the other session's sandbox was removed")
	}

	// Deleting the agent stops its rooms; the sandbox of the live one is parked (ownership
	// proven by the marker the host loaded), and its files stay for cleanup.
	must(t, c.Do(context.Background(), http.MethodDelete, "/v1/agents/"+agent.String(), nil, nil))
	wait.Eventually(t, 30*time.Second, func() error {
		if sbs := e.sandboxes(t); sbs[ids[s2].SandboxName] != "stopped" {
			return fmt.Errorf("sandboxes %v", sbs)
		}
		return nil
	}, "the deleted agent's sandbox to stop")
}

// A sandboxed session whose provider state is lost (a fresh host root) resumes the very same
// provider session from its newest verified checkpoint; with every checkpoint corrupt it
// fails closed before the runtime is built, and its messages stay queued.
func TestALostProviderStateIsRestoredFromItsCheckpointOrFailsClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := startSandboxDev(t)
	c := e.d.client
	agent := sandboxedAgent(t, c, "keeper", domain.PlacementDedicated)
	room, session := roomWith(t, c, "lab", agent)
	for i, want := range []string{"turns remembered: 0", "turns remembered: 1"} {
		if r := awaitReply(t, c, postText(t, c, room.ID, fmt.Sprintf("[[count]] %d", i)), 60*time.Second); !strings.Contains(r.Text, want) {
			t.Fatalf("turn %d: %q", i, r.Text)
		}
	}
	hostRoot := filepath.Join(e.home, "runtime-hosts", session.String())
	state := filepath.Join(hostRoot, "provider-state", "cursor")
	checkpoints := func(n int) api.CheckpointList {
		t.Helper()
		var l api.CheckpointList
		wait.Eventually(t, 30*time.Second, func() error {
			must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+session.String()+"/checkpoints", nil, &l))
			if len(l.Items) < n {
				return fmt.Errorf("%d checkpoints", len(l.Items))
			}
			return nil
		}, "%d checkpoints", n)
		return l
	}
	loseState := func() {
		t.Helper()
		if err := os.RemoveAll(state); err != nil {
			t.Fatal(err)
		}
	}
	stop := func() {
		t.Helper()
		must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/stop", nil, nil))
	}
	restart := func() {
		t.Helper()
		must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/restart", nil, nil))
	}

	// A manual checkpoint while the runtime is live (between turns).
	var manual api.CheckpointBody
	must(t, c.Operation(ctx, http.MethodPost, "/v1/hosts/"+session.String()+"/checkpoints", nil, &manual, nil))
	if manual.Reason != domain.CheckpointManual || manual.PayloadBytes == 0 {
		t.Fatalf("manual checkpoint %+v", manual)
	}
	continuity := func() api.ContinuityBody {
		t.Helper()
		var b api.ContinuityBody
		must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+session.String()+"/continuity", nil, &b))
		return b
	}
	if got := continuity(); got.Status != domain.ContinuityHealthy || got.CanStartFresh || !got.RuntimeRunning {
		t.Fatalf("continuity while live after the manual checkpoint: %+v", got.ContinuityReportBody)
	}
	stop()
	first := checkpoints(1).Items[0] // the manual one: no turn ran since, so the stop adds none
	if got := continuity(); got.Status != domain.ContinuityHealthy || got.CanStartFresh || len(got.Sessions) != 1 || !got.Sessions[0].Captured {
		t.Fatalf("continuity after the checkpoint: %+v", got.ContinuityReportBody)
	}
	if len(first.Sessions) != 1 || first.Sessions[0].ProviderSessionID == "" {
		t.Fatalf("checkpoint %+v", first)
	}
	loseState()
	restart()
	awaitPresence(t, c, session, domain.PresenceLive, 60*time.Second)
	if r := awaitReply(t, c, postText(t, c, room.ID, "[[count]] after the loss"), 60*time.Second); !strings.Contains(r.Text, "turns remembered: 2") {
		t.Fatalf("after restoring: %q", r.Text)
	}
	if got := getSession(t, c, session); got.ProviderSessionID != first.Sessions[0].ProviderSessionID {
		t.Fatalf("the session moved to provider session %q", got.ProviderSessionID)
	}

	// Every checkpoint corrupt and the state lost again: no silent fresh thread.
	stop()
	cps := checkpoints(2).Items
	// Retention: the newest is kept; an older one's payload may go, its record stays.
	del := func(id uuid.UUID) error {
		return c.Operation(ctx, http.MethodPost, "/v1/hosts/"+session.String()+"/checkpoints/"+id.String()+"/delete-payload",
			api.DeletePayloadRequest{ConfirmPermanent: true}, nil, nil)
	}
	if err := del(cps[0].ID); !isStatus(err, http.StatusConflict) {
		t.Fatalf("deleting the newest checkpoint: %v", err)
	}
	if err := c.Operation(ctx, http.MethodPost, "/v1/hosts/"+session.String()+"/checkpoints/"+cps[1].ID.String()+"/delete-payload",
		api.DeletePayloadRequest{}, nil, nil); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("deleting without confirmation: %v", err)
	}
	var deletion domain.CheckpointDeletion
	must(t, c.Operation(ctx, http.MethodPost, "/v1/hosts/"+session.String()+"/checkpoints/"+cps[1].ID.String()+"/delete-payload",
		api.DeletePayloadRequest{ConfirmPermanent: true}, &deletion, nil))
	if deletion.Stage != domain.DeletionSucceeded {
		t.Fatalf("deletion %+v", deletion)
	}
	if _, err := os.Stat(filepath.Join(hostRoot, "checkpoints", cps[1].ID.String())); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the payload is still there: %v", err)
	}
	if after := checkpoints(2).Items; after[1].PayloadDeletedAt == nil || after[0].PayloadDeletedAt != nil {
		t.Fatalf("records after the deletion %+v", after)
	}
	for _, cp := range checkpoints(2).Items {
		if err := os.RemoveAll(filepath.Join(hostRoot, "checkpoints", cp.ID.String(), "payload")); err != nil {
			t.Fatal(err)
		}
	}
	loseState()
	restart()
	wait.Eventually(t, 60*time.Second, func() error {
		s := getSession(t, c, session)
		if s.Runtime != nil && strings.Contains(s.Runtime.LastError, "provider state is gone") {
			if s.Presence == domain.PresenceLive {
				t.Fatalf("live after failing closed: %+v", s)
			}
			return nil
		}
		return fmt.Errorf("runtime %+v", s.Runtime)
	}, "the session to fail closed")
	got := continuity()
	if got.Status != domain.ContinuityCorrupt || !got.CanStartFresh || got.RuntimeRunning || got.EvidenceChecksum == "" {
		t.Fatalf("continuity after failing closed: %+v", got.ContinuityReportBody)
	}
	cli := []string{"JAM_URL=" + e.d.apiURL, "JAM_HOME=" + filepath.Dir(e.d.tokenFile)}
	if out, err := runJam(t, cli, "host", "continuity", session.String()); err != nil ||
		!strings.Contains(out, "corrupt") || !strings.Contains(out, "jam host start-fresh "+session.String()+" --confirm --evidence "+got.EvidenceChecksum) {
		t.Fatalf("jam host continuity: %v\n%s", err, out)
	}
	if out, err := runJam(t, cli, "host", "checkpoints", session.String()); err != nil || !strings.Contains(out, "deleted") {
		t.Fatalf("jam host checkpoints: %v\n%s", err, out)
	}
	m := postText(t, c, room.ID, "[[count]] anyone?")
	wait.Never(t, 2*time.Second, func() bool { return len(repliesTo(t, c, m)) != 0 }, "an answer from a fresh thread")

	// Start fresh, explicitly: the wrong evidence is refused; the confirmed one gives the room
	// a new session (and thread) that answers the queued message; the old one is archived.
	path := "/v1/hosts/" + session.String() + "/continuity/start-fresh"
	if err := c.Operation(ctx, http.MethodPost, path, api.StartFreshRequest{ConfirmStartFresh: true, EvidenceChecksum: "stale"}, nil, nil); !isStatus(err, http.StatusConflict) {
		t.Fatalf("start-fresh on stale evidence: %v", err)
	}
	if err := c.Operation(ctx, http.MethodPost, path, api.StartFreshRequest{EvidenceChecksum: got.EvidenceChecksum}, nil, nil); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("start-fresh without confirmation: %v", err)
	}
	var reset domain.ContinuityReset
	must(t, c.Operation(ctx, http.MethodPost, path, api.StartFreshRequest{ConfirmStartFresh: true, EvidenceChecksum: got.EvidenceChecksum}, &reset, nil))
	if len(reset.Mapping) != 1 || reset.Mapping[0].SourceSession != session || reset.Mapping[0].RoomID != room.ID {
		t.Fatalf("reset %+v", reset)
	}
	if r := awaitReply(t, c, m, 60*time.Second); !strings.Contains(r.Text, "turns remembered: 0") {
		t.Fatalf("the fresh session's answer: %q", r.Text)
	}
	fresh := getSession(t, c, reset.Mapping[0].ReplacementSession)
	old := getSession(t, c, session)
	if fresh.Removed || fresh.RoomID != room.ID || !old.Removed || fresh.ProviderSessionID == old.ProviderSessionID {
		t.Fatalf("fresh %+v old %+v", fresh, old)
	}
	var src api.HostBody
	must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+session.String(), nil, &src))
	if src.State != domain.HostArchived {
		t.Fatalf("the source host is %s", src.State)
	}
	if _, err := os.Stat(hostRoot); err != nil {
		t.Fatalf("the source host's files were deleted: %v", err)
	}
	// Asking again returns the completed reset; nothing is reset twice.
	var again domain.ContinuityReset
	must(t, c.Operation(ctx, http.MethodPost, path, api.StartFreshRequest{ConfirmStartFresh: true, EvidenceChecksum: got.EvidenceChecksum}, &again, nil))
	if again.ID != reset.ID || again.Mapping[0].ReplacementSession != reset.Mapping[0].ReplacementSession {
		t.Fatalf("a second start-fresh made another reset: %+v", again)
	}
}
