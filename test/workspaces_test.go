package test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

func workspacePath(home string, host, session uuid.UUID) string {
	return filepath.Join(home, "runtime-hosts", host.String(), "workspace-root", "sessions", session.String())
}

func getWorkspace(t *testing.T, c *client.Client, id uuid.UUID) api.WorkspaceBody {
	t.Helper()
	var w api.WorkspaceBody
	must(t, c.Do(context.Background(), http.MethodGet, "/v1/workspaces/"+id.String(), nil, &w))
	return w
}

func workspaceOp(c *client.Client, id uuid.UUID, verb string, req api.WorkspaceOpRequest) (api.WorkspaceOpBody, error) {
	var out api.WorkspaceOpBody
	err := c.Operation(context.Background(), http.MethodPost, "/v1/workspaces/"+id.String()+"/"+verb, req, &out, nil)
	return out, err
}

// awaitHostState polls the host until it is in state (and, parked, its sandbox stopped).
func awaitHostState(t *testing.T, c *client.Client, host uuid.UUID, state domain.RuntimeHostState, timeout time.Duration) api.HostBody {
	t.Helper()
	var h api.HostBody
	wait.Eventually(t, timeout, func() error {
		must(t, c.Do(context.Background(), http.MethodGet, "/v1/hosts/"+host.String(), nil, &h))
		if h.State != state {
			return fmt.Errorf("host is %s", h.State)
		}
		return nil
	}, "host %s to be %s", host, state)
	return h
}

// The whole life of a workspace through the public API: a conversation and the agent's
// files, guards against bad input, archive (export first, live bytes after), host cleanup
// (sandbox and root gone, export kept), restore, and the room's conversation resuming the
// exact provider session from the checkpoint the export carried.
func TestAnArchivedWorkspaceOutlivesItsHostAndIsRestoredWithItsConversation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := startSandboxDev(t)
	c := e.d.client
	agent := sandboxedAgent(t, c, "archivist", domain.PlacementDedicated)
	room, session := roomWith(t, c, "lab", agent)
	for i, want := range []string{"turns remembered: 0", "turns remembered: 1"} {
		if r := awaitReply(t, c, postText(t, c, room.ID, fmt.Sprintf("[[count]] %d", i)), 60*time.Second); !strings.Contains(r.Text, want) {
			t.Fatalf("turn %d: %q", i, r.Text)
		}
	}
	host := session // a Dedicated host's id is its session's
	live := workspacePath(e.home, host, session)
	if err := os.WriteFile(filepath.Join(live, "work.txt"), []byte("the agent's work"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Bad input and premature requests.
	if err := c.Do(ctx, http.MethodPost, "/v1/hosts/"+host.String()+"/cleanup", api.CleanupRequest{}, nil); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("cleanup without confirm_permanent: %v", err)
	}
	var pre api.CleanupInspectionBody
	must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+host.String()+"/cleanup", nil, &pre))
	if pre.CanCleanup || len(pre.Blockers) == 0 {
		t.Fatalf("a live host's preflight: %+v", pre)
	}
	if err := c.Operation(ctx, http.MethodPost, "/v1/hosts/"+host.String()+"/cleanup", api.CleanupRequest{ConfirmPermanent: true}, nil, nil); !isStatus(err, http.StatusConflict) {
		t.Fatalf("cleanup of a live host: %v", err)
	}
	exp, err := workspaceOp(c, session, "export", api.WorkspaceOpRequest{})
	if err != nil || exp.Export == nil || exp.Operation == nil || exp.Operation.ResultClass != domain.ResultExported {
		t.Fatalf("export %+v %v", exp, err)
	}
	if exp.Export.CheckpointID != nil {
		t.Logf("export carries checkpoint %s", exp.Export.CheckpointID)
	}
	if _, err := workspaceOp(c, session, "restore", api.WorkspaceOpRequest{}); !isStatus(err, http.StatusConflict) {
		t.Fatalf("restore into an existing destination: %v", err)
	}
	if _, err := workspaceOp(c, session, "exports/"+exp.Export.ID.String()+"/delete", api.WorkspaceOpRequest{ConfirmPermanent: true}); !isStatus(err, http.StatusConflict) {
		t.Fatalf("deleting the only export of an unarchived workspace: %v", err)
	}
	if _, err := workspaceOp(c, session, "exports/"+exp.Export.ID.String()+"/delete", api.WorkspaceOpRequest{}); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("deleting without confirm_permanent: %v", err)
	}
	if _, err := workspaceOp(c, session, "archive", api.WorkspaceOpRequest{Retention: "forever"}); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("archive with a bogus retention: %v", err)
	}

	// A second operation while the archive runs is refused with 409 (and, had the archive
	// finished first, an export of a workspace with no live bytes is 409 too).
	var wg sync.WaitGroup
	var arch api.WorkspaceOpBody
	var archErr error
	wg.Add(1)
	go func() { defer wg.Done(); arch, archErr = workspaceOp(c, session, "archive", api.WorkspaceOpRequest{}) }()
	wait.Eventually(t, 10*time.Second, func() bool {
		ops := getWorkspace(t, c, session).Operations
		return len(ops) > 0 && ops[0].Kind == domain.WorkspaceOpArchive
	}, "the archive to start")
	if _, err := workspaceOp(c, session, "export", api.WorkspaceOpRequest{}); !isStatus(err, http.StatusConflict) {
		t.Fatalf("an operation during the archive: %v", err)
	}
	wg.Wait()
	if archErr != nil || arch.Operation == nil || arch.Operation.ResultClass != domain.ResultArchived || arch.Export == nil {
		t.Fatalf("archive %+v %v", arch, archErr)
	}
	if _, err := os.Stat(live); !os.IsNotExist(err) {
		t.Fatalf("live bytes remain after the archive: %v", err)
	}
	ws := getWorkspace(t, c, session)
	kept := 0
	for _, x := range ws.Exports {
		if x.DeletedAt == nil {
			kept++
		}
	}
	if ws.State != domain.WorkspaceArchived || kept != 1 || ws.Operations[0].State != domain.OpSucceeded {
		t.Fatalf("archived workspace %+v", ws)
	}
	// An archived session does not start: its messages wait.
	held := postText(t, c, room.ID, "[[count]] while archived")

	awaitHostState(t, c, host, domain.HostParked, 30*time.Second)
	wait.Eventually(t, 30*time.Second, func() error {
		if sbs := e.sandboxes(t); sbs[hostsOf(t, c, agent)[0].SandboxName] != "stopped" {
			return fmt.Errorf("sandboxes %v", sbs)
		}
		return nil
	}, "the sandbox to park")
	var h api.HostBody
	must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+host.String(), nil, &h))
	if h.Capacity == nil || len(h.Capacity.ExportBytes) != 1 || len(h.Capacity.CheckpointBytes) == 0 || h.Capacity.RootBytes == nil {
		t.Fatalf("capacity %+v", h.Capacity)
	}
	must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+host.String()+"/cleanup", nil, &pre))
	if !pre.CanCleanup || pre.RetainedExportBytes == 0 || pre.PlannedRuntimeHostBytes == 0 {
		t.Fatalf("preflight of a preserved, parked host: %+v", pre)
	}
	var cleaned struct {
		Cleanup domain.HostCleanupOperation `json:"cleanup"`
	}
	must(t, c.Operation(ctx, http.MethodPost, "/v1/hosts/"+host.String()+"/cleanup", api.CleanupRequest{ConfirmPermanent: true}, &cleaned, nil))
	if cleaned.Cleanup.Stage != domain.CleanupSucceeded || cleaned.Cleanup.RemovedRuntimeHostBytes == 0 {
		t.Fatalf("cleanup %+v", cleaned.Cleanup)
	}
	if _, err := os.Stat(filepath.Join(e.home, "runtime-hosts", host.String())); !os.IsNotExist(err) {
		t.Fatalf("host root remains: %v", err)
	}
	if len(e.sandboxes(t)) != 0 || e.commands(t, "rm", "") != 1 {
		t.Fatalf("sandboxes after cleanup %v", e.sandboxes(t))
	}
	if _, err := os.Stat(filepath.Join(e.home, "workspace-exports", arch.Export.ID.String())); err != nil {
		t.Fatalf("the export was not kept: %v", err)
	}
	if hb := awaitHostState(t, c, host, domain.HostRemoved, time.Second); hb.State != domain.HostRemoved {
		t.Fatal("host not removed")
	}

	// Restore brings the workspace and the checkpoint back; restarted, the room's provider
	// session resumes exactly and answers the message that waited.
	res, err := workspaceOp(c, session, "restore", api.WorkspaceOpRequest{})
	if err != nil || res.Operation == nil || res.Operation.Kind != domain.WorkspaceOpReconcile || res.Operation.ResultClass != domain.ResultRestoredExport {
		t.Fatalf("restore %+v %v", res, err)
	}
	if b, err := os.ReadFile(filepath.Join(live, "work.txt")); err != nil || string(b) != "the agent's work" {
		t.Fatalf("restored work %q %v", b, err)
	}
	awaitHostState(t, c, host, domain.HostParked, time.Second)
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/restart", nil, nil))
	if r := awaitReply(t, c, held, 90*time.Second); !strings.Contains(r.Text, "turns remembered: 2") {
		t.Fatalf("after the restore: %q", r.Text)
	}
}

// faultWorker is a `jam worker` of node w1 against a production server, optionally paused at
// a crash point.
type faultWorker struct {
	env   []string
	fault string
}

func (f faultWorker) start(t *testing.T, point string) *proc {
	t.Helper()
	env := f.env
	if point != "" {
		env = append(append([]string{}, env...), "JAM_FAULT_PAUSE="+point, "JAM_FAULT_DIR="+f.fault)
	}
	return startJam(t, env, "worker", "--node", "w1", "--sbx", fakesbx.Binary(t))
}

func (f faultWorker) awaitPause(t *testing.T, point string) {
	t.Helper()
	wait.Eventually(t, 90*time.Second, func() error {
		_, err := os.Stat(filepath.Join(f.fault, point))
		return err
	}, "the worker to reach %s", point)
}

func kill(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
}

// A worker SIGKILLed at a stage of an archive (export committed but unrecorded, older
// exports pruned, live bytes removed) or of a host cleanup (root half removed): a new worker
// finishes the same operation exactly once, the journal never moves backward, and the
// export holds the workspace's bytes.
func TestAWorkerKilledDuringAnArchiveOrHostCleanupFinishesItExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := startProductionServer(t, "crash-test-token")
	c := p.client
	home := filepath.Join(t.TempDir(), "node-w1")
	fw := faultWorker{fault: t.TempDir(), env: append(append(p.base, "JAM_HOME="+home, "FAKESBX_STATE="+t.TempDir()),
		ownedEnv(t, t.TempDir())...)}
	points := []string{"export.committed", "archive.pruned", "archive.bytes_removed"}
	agent := sandboxedAgent(t, c, "crashy", domain.PlacementDedicated)
	w := fw.start(t, "")
	sessions := make([]uuid.UUID, len(points))
	for i := range points {
		room, s := roomWith(t, c, fmt.Sprintf("room-%d", i), agent)
		awaitReply(t, c, postText(t, c, room.ID, "hello"), 90*time.Second)
		if err := os.WriteFile(filepath.Join(workspacePath(home, s, s), "work.txt"), []byte(fmt.Sprintf("work %d", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		// A first export, so keep_latest has an older one to prune.
		if _, err := workspaceOp(c, s, "export", api.WorkspaceOpRequest{}); err != nil {
			t.Fatal(err)
		}
		sessions[i] = s
	}
	kill(t, w)
	for i, point := range points {
		s := sessions[i]
		w = fw.start(t, point)
		go func() { _, _ = workspaceOp(c, s, "archive", api.WorkspaceOpRequest{}) }()
		fw.awaitPause(t, point)
		kill(t, w)
		w = fw.start(t, "")
		var ws api.WorkspaceBody
		wait.Eventually(t, 120*time.Second, func() error {
			ws = getWorkspace(t, c, s)
			if len(ws.Operations) > 0 && ws.Operations[0].Kind == domain.WorkspaceOpArchive && ws.Operations[0].State.Terminal() {
				return nil
			}
			return fmt.Errorf("operations %+v", ws.Operations)
		}, "%s: the archive to finish", point)
		op := ws.Operations[0]
		if op.State != domain.OpSucceeded || ws.State != domain.WorkspaceArchived {
			t.Fatalf("%s: %+v, workspace %s", point, op, ws.State)
		}
		var ob api.OperationBody
		must(t, c.Do(ctx, http.MethodGet, "/v1/workspaces/"+s.String()+"/operations/"+op.ID.String(), nil, &ob))
		if len(ob.Events) != 2 || ob.Events[0].State != string(domain.OpRunning) || ob.Events[1].State != string(domain.OpSucceeded) {
			t.Fatalf("%s: journal %+v", point, ob.Events)
		}
		var keptExports []domain.WorkspaceExport
		for _, x := range ws.Exports {
			if x.DeletedAt == nil {
				keptExports = append(keptExports, x.WorkspaceExport)
			}
		}
		if len(keptExports) != 1 || len(ws.Exports) != 2 {
			t.Fatalf("%s: exports %+v", point, ws.Exports)
		}
		b, err := os.ReadFile(filepath.Join(home, "workspace-exports", keptExports[0].ID.String(), "workspace", "work.txt"))
		if err != nil || string(b) != fmt.Sprintf("work %d", i) {
			t.Fatalf("%s: the export does not hold the work: %q %v", point, b, err)
		}
		if _, err := os.Stat(workspacePath(home, s, s)); !os.IsNotExist(err) {
			t.Fatalf("%s: live bytes remain", point)
		}
		kill(t, w)
	}

	// Host cleanup of the last archived host, killed with its root half removed.
	host := sessions[len(sessions)-1]
	w = fw.start(t, "cleanup.root_renamed")
	awaitHostState(t, c, host, domain.HostParked, 60*time.Second)
	go func() {
		_ = c.Operation(ctx, http.MethodPost, "/v1/hosts/"+host.String()+"/cleanup", api.CleanupRequest{ConfirmPermanent: true}, nil, nil)
	}()
	fw.awaitPause(t, "cleanup.root_renamed")
	kill(t, w)
	w = fw.start(t, "")
	var pre api.CleanupInspectionBody
	wait.Eventually(t, 120*time.Second, func() error {
		must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+host.String()+"/cleanup", nil, &pre))
		if pre.Cleanup != nil && pre.Cleanup.Stage == domain.CleanupSucceeded {
			return nil
		}
		return fmt.Errorf("cleanup %+v", pre.Cleanup)
	}, "the cleanup to finish")
	if _, err := os.Stat(filepath.Join(home, "runtime-hosts", host.String())); !os.IsNotExist(err) {
		t.Fatal("the host root remains")
	}
	if entries, _ := os.ReadDir(filepath.Join(home, "runtime-hosts")); len(entries) != len(sessions)-1 {
		t.Fatalf("other hosts' roots touched or a tombstone left: %d entries", len(entries))
	}
	if code := w.interrupt(45 * time.Second); code != 0 {
		t.Fatalf("worker exited %d after Ctrl-C", code)
	}
}
