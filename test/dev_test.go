package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

const devNode = "itest-node"

// devInstance is a running `jam dev` and the addresses it printed.
type devInstance struct {
	proc                    *proc
	apiURL, temporal, uiURL string
	tokenFile               string
	startedAt, healthyAt    time.Time
	client                  *client.Client
}

func startDev(t *testing.T, home string, extra ...string) *devInstance {
	t.Helper()
	return startDevEnv(t, home, nil, extra...)
}

// startDevEnv is startDev with environment variables added to jam dev's.
func startDevEnv(t *testing.T, home string, env []string, extra ...string) *devInstance {
	t.Helper()
	args := append([]string{"dev", "--listen", "127.0.0.1:0", "--temporal-listen", "127.0.0.1:0",
		"--ui-listen", "127.0.0.1:0", "--node", devNode}, extra...)
	started := time.Now()
	// The suite starts dozens of jam dev at once on two cores: their start-up probes of the
	// agent CLIs on PATH (a --version of each Node CLI, ~2 s of CPU per start) are turned off
	// here, explicitly; a test that wants them passes JAM_WORKER_PROBE_CLIS=1 in env.
	p := startJam(t, append([]string{"JAM_HOME=" + home, "JAM_WORKER_PROBE_CLIS=0"}, env...), args...)
	got := p.banner(60*time.Second, `Jam API:\s+(\S+)`, `Temporal:\s+(\S+)`, `Temporal Web UI:\s+(\S+)`, `Operator token:\s+(\S+)`)
	d := &devInstance{proc: p, apiURL: got[0], temporal: got[1], uiURL: got[2], tokenFile: got[3], startedAt: started}
	waitHTTP(t, d.apiURL+"/healthz", http.StatusOK, 30*time.Second)
	d.healthyAt = time.Now()
	token, err := os.ReadFile(d.tokenFile)
	if err != nil {
		t.Fatalf("read operator token: %v", err)
	}
	d.client = apiClient(d.apiURL, strings.TrimSpace(string(token)))
	return d
}

func (d *devInstance) stop(t *testing.T) {
	t.Helper()
	if code := d.proc.interrupt(45 * time.Second); code != 0 {
		t.Fatalf("jam dev exited %d after Ctrl-C, want 0", code)
	}
}

func TestDevServesAPIUIAndWorkerAndKeepsDataAcrossRestart(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	ctx := context.Background()
	d := startDev(t, home)
	// Acceptance: health, readiness, the Web UI and this node listed within 30 s of start.
	waitHTTP(t, d.apiURL+"/readyz", http.StatusOK, 30*time.Second)
	waitHTTP(t, d.uiURL, http.StatusOK, 30*time.Second)
	var nodes api.NodeList
	wait.Eventually(t, time.Until(d.startedAt.Add(30*time.Second)), func() error {
		if err := d.client.Do(ctx, http.MethodGet, "/v1/nodes", nil, &nodes); err != nil {
			return err
		}
		if len(nodes.Items) != 1 {
			return fmt.Errorf("nodes %+v", nodes.Items)
		}
		return nil
	}, "this node listed within 30 s of start")
	if took := time.Since(d.startedAt); took > 30*time.Second {
		t.Fatalf("serving after %s, want within 30 s", took)
	} else {
		t.Logf("jam dev healthy after %s, ready with UI and node after %s", d.healthyAt.Sub(d.startedAt).Round(time.Millisecond), took.Round(time.Millisecond))
	}

	// A second jam dev on the same data directory is refused instead of sharing its files.
	second := startJam(t, []string{"JAM_HOME=" + home}, "dev", "--listen", "127.0.0.1:0",
		"--temporal-listen", "127.0.0.1:0", "--ui-listen", "")
	if code := second.exitCode(30 * time.Second); code == 0 || !strings.Contains(second.stderrText(), "another jam process") {
		t.Fatalf("second jam dev on one home: exit %d: %s", code, second.stderrText())
	}

	st, err := os.Stat(d.tokenFile)
	if err != nil || st.Mode().Perm() != 0o600 || filepath.Dir(d.tokenFile) != home {
		t.Fatalf("token file %s: mode %v, %v", d.tokenFile, st.Mode().Perm(), err)
	}
	waitHTTP(t, d.apiURL+"/readyz", http.StatusOK, 10*time.Second)

	resp, err := http.Get(d.uiURL)
	if err != nil {
		t.Fatalf("temporal web ui: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(strings.ToLower(string(body)), "<!doctype html") {
		t.Fatalf("temporal web ui answered %d: %.200s", resp.StatusCode, body)
	}

	if len(nodes.Items) != 1 || nodes.Items[0].Name != devNode || nodes.Items[0].Stale || nodes.Items[0].DataDir != home {
		t.Fatalf("nodes %+v", nodes.Items)
	}

	// The node's worker answers on its own task queue, through a real workflow.
	var probe api.NodeProbeBody
	if err := d.client.Do(ctx, http.MethodPost, "/v1/nodes/"+devNode+"/probe", nil, &probe); err != nil {
		t.Fatal(err)
	}
	if probe.Report.Node != devNode || probe.Report.PID != d.proc.cmd.Process.Pid || probe.WorkflowID != contract.NodeProbeID(devNode) {
		t.Fatalf("probe %+v", probe)
	}

	// A record written before the restart.
	if err := d.client.Do(ctx, http.MethodPut, "/v1/settings/runtime.defaults.idle_secs", api.PutSettingRequest{Value: json.RawMessage(`321`)}, nil); err != nil {
		t.Fatal(err)
	}
	d.stop(t)

	d2 := startDev(t, home)
	var setting api.SettingBody
	if err := d2.client.Do(ctx, http.MethodGet, "/v1/settings/runtime.defaults.idle_secs", nil, &setting); err != nil {
		t.Fatal(err)
	}
	if string(setting.Value) != "321" {
		t.Fatalf("setting after restart = %s, want 321", setting.Value)
	}
	// Temporal kept its history in the data directory too.
	tc := temporaltest.Dial(t, d2.temporal)
	desc, err := tc.DescribeWorkflowExecution(ctx, probe.WorkflowID, probe.RunID)
	if err != nil {
		t.Fatalf("the probe workflow did not survive the restart: %v", err)
	}
	if s := desc.GetWorkflowExecutionInfo().GetStatus(); s != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Fatalf("probe workflow status %v", s)
	}
	if err := d2.client.Do(ctx, http.MethodPost, "/v1/nodes/"+devNode+"/probe", nil, &probe); err != nil {
		t.Fatalf("probe after restart: %v", err)
	}
	d2.stop(t)
}

func TestDevEphemeralKeepsNothing(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	ctx := context.Background()
	d := startDev(t, home, "--ephemeral")
	if err := d.client.Do(ctx, http.MethodPut, "/v1/settings/runtime.defaults.idle_secs", api.PutSettingRequest{Value: json.RawMessage(`77`)}, nil); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
	for _, f := range []string{"jam.db", "temporal.db"} {
		if _, err := os.Stat(filepath.Join(home, f)); !os.IsNotExist(err) {
			t.Fatalf("ephemeral run left %s in the data directory (%v)", f, err)
		}
	}
	d2 := startDev(t, home, "--ephemeral")
	var setting api.SettingBody
	if err := d2.client.Do(ctx, http.MethodGet, "/v1/settings/runtime.defaults.idle_secs", nil, &setting); err != nil {
		t.Fatal(err)
	}
	if string(setting.Value) != "null" {
		t.Fatalf("ephemeral run remembered %s", setting.Value)
	}
	d2.stop(t)
}

func TestCLIReadsTheDevTokenAndPrintsNodes(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDev(t, home, "--ephemeral")
	env := []string{"JAM_HOME=" + home, "JAM_URL=" + d.apiURL}
	out, err := runJam(t, env, "node", "list")
	if err != nil || !strings.Contains(out, devNode) || !strings.Contains(out, "jam.node."+devNode) {
		t.Fatalf("jam node list: %v\n%s", err, out)
	}
	if out, err = runJam(t, env, "setting", "set", "runtime.defaults.idle_secs", "45"); err != nil || !strings.Contains(out, "= 45") {
		t.Fatalf("jam setting set: %v\n%s", err, out)
	}
	if _, err = runJam(t, env, "setting", "set", "runtime.defaults.idle_secs", "never"); err == nil ||
		!strings.Contains(err.Error(), "value: must be an integer") {
		t.Fatalf("jam setting set with a bad value: %v", err)
	}
	if out, err = runJam(t, env, "node", "probe", devNode); err != nil || !strings.Contains(out, "node "+devNode+" answered") {
		t.Fatalf("jam node probe: %v\n%s", err, out)
	}
	if _, err = runJam(t, []string{"JAM_HOME=" + home, "JAM_URL=" + d.apiURL, "JAM_TOKEN=wrong"}, "node", "list"); err == nil ||
		!strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v", err)
	}
	d.stop(t)
}

// A listen address jam dev cannot use stops it before it starts anything: a non-zero exit,
// one line on stderr naming the address and the flag and variable that move it, no panic.
// (With the Temporal port taken it used to log "address already in use" and then panic in
// the embedded frontend.)
func TestDevRefusesATakenOrRemoteAddressInOneLineWithoutPanicking(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	cases := []struct {
		name   string
		flag   string
		env    string
		value  string
		viaEnv bool
		want   []string
	}{
		{"temporal port taken", "temporal-listen", "JAM_DEV_TEMPORAL_LISTEN", addr, false, []string{addr, "in use"}},
		{"ui port taken, from the environment", "ui-listen", "JAM_DEV_UI_LISTEN", addr, true, []string{addr, "in use"}},
		{"api port taken", "listen", "JAM_LISTEN", addr, false, []string{addr, "in use"}},
		{"remote web ui", "ui-listen", "JAM_DEV_UI_LISTEN", "0.0.0.0:0", false, []string{"0.0.0.0:0", "--allow-remote-ui", "JAM_DEV_ALLOW_REMOTE_UI"}},
		{"remote frontend, from the environment", "temporal-listen", "JAM_DEV_TEMPORAL_LISTEN", "0.0.0.0:0", true, []string{"0.0.0.0:0", "--allow-remote-ui"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"dev", "--ephemeral", "--node", devNode}
			var env []string
			for _, f := range []string{"listen", "temporal-listen", "ui-listen"} {
				switch {
				case f != c.flag:
					args = append(args, "--"+f, "127.0.0.1:0")
				case c.viaEnv:
					env = append(env, c.env+"="+c.value)
				default:
					args = append(args, "--"+f, c.value)
				}
			}
			p := startJam(t, append([]string{"JAM_HOME=" + filepath.Join(t.TempDir(), "home")}, env...), args...)
			if code := p.exitCode(30 * time.Second); code == 0 {
				t.Fatal("jam dev exited 0")
			}
			stderr := strings.TrimSpace(p.stderrText())
			if strings.Contains(stderr, "\n") || strings.Contains(stderr, "panic") || !strings.HasPrefix(stderr, "jam: ") {
				t.Fatalf("want one line, no panic; stderr:\n%s", stderr)
			}
			for _, want := range append(c.want, "--"+c.flag, c.env) {
				if !strings.Contains(stderr, want) {
					t.Errorf("%q does not name %s", stderr, want)
				}
			}
		})
	}
}
