package test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// `jam dev` resolves its provider CLIs at start, in the background, as every worker does:
// `jam node list` shows them without anyone asking for a probe.
func TestDevShowsItsProviderCLIsWithoutAProbe(t *testing.T) {
	t.Parallel()
	// ACP only: what is shown without a probe is the point, not every CLI's `--version`
	// (opencode's alone costs seconds of CPU on a busy 2-core machine).
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), ownedEnv(t, t.TempDir(), probeCLIsAtStart, "JAM_WORKER_PROVIDERS=acp"))
	var node api.NodeBody
	wait.Eventually(t, 60*time.Second, func() error {
		var nodes api.NodeList
		if err := d.client.Do(context.Background(), http.MethodGet, "/v1/nodes", nil, &nodes); err != nil {
			return err
		}
		if len(nodes.Items) != 1 || nodes.Items[0].CLIs == nil {
			return fmt.Errorf("nodes %+v", nodes.Items)
		}
		node = nodes.Items[0]
		return nil
	}, "the node's provider CLIs listed without a probe")
	i := slices.IndexFunc(node.CLIs, func(c domain.NodeCLI) bool { return c.Command == "jam-testagent" })
	if i < 0 || node.CLIs[i].Path != testagent.Binary(t) || node.CLIs[i].Source != "environment" || node.CLIs[i].Problem != "" {
		t.Fatalf("node CLIs %+v", node.CLIs)
	}
	for _, c := range node.CLIs {
		t.Logf("%s: %s %s %s", c.Command, c.Version, c.Path, c.Problem)
	}
}

// A template whose env names a variable the node's worker lacks, or whose command does not
// resolve there, is refused at save with the variable or the path and the fix; the same
// template saves once the node has them. The save's added latency is logged.
func TestATemplateTheNodeCannotRunIsRefusedAtSave(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), "SET_HERE=1"))
	c, ctx := d.client, context.Background()
	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "checked", Kind: domain.AgentOwned}, &agent))
	templates := "/v1/agents/" + agent.ID.String() + "/templates"
	refused := func(tmpl domain.TemplateConfig, says ...string) {
		t.Helper()
		err := c.Do(ctx, http.MethodPost, templates, tmpl, nil)
		var e *client.Error
		if !errors.As(err, &e) || e.Status != http.StatusUnprocessableEntity || e.Body.Code != domain.CodePrecondition {
			t.Fatalf("template %+v: %v, want 422 precondition", tmpl, err)
		}
		for _, s := range says {
			if !strings.Contains(e.Body.Message, s) {
				t.Errorf("%q does not say %q", e.Body.Message, s)
			}
		}
		t.Logf("refused: %s", e.Body.Message)
	}

	refused(domain.TemplateConfig{Alias: "keyed", Transport: domain.TransportACP, EnvAllowlist: []string{"SET_HERE", "STUB_KEY"}},
		"STUB_KEY is not set in the environment of node "+devNode+" (the worker of this `jam dev`)",
		"start it with STUB_KEY set (STUB_KEY=… jam dev) or remove --env STUB_KEY")
	gone := filepath.Join(t.TempDir(), "my-agent")
	refused(domain.TemplateConfig{Alias: "pathed", Transport: domain.TransportACP, Command: gone},
		"command "+gone+" does not resolve on node "+devNode, "does not exist", "--command /absolute/path")
	// The CLI says the same.
	cli := []string{"JAM_URL=" + d.apiURL, "JAM_HOME=" + home}
	if out, err := runJam(t, cli, "template", "create", agent.ID.String(), "--alias", "cli", "--transport", "acp", "--env", "STUB_KEY"); err == nil ||
		!strings.Contains(out+err.Error(), "remove --env STUB_KEY") {
		t.Fatalf("jam template create --env STUB_KEY: %v\n%s", err, out)
	}

	// What the node has saves, each save asking the node; the same command saves once it exists.
	must(t, os.WriteFile(gone, []byte("#!/bin/sh\necho 1.0.0\n"), 0o755))
	var saved api.TemplateBody
	must(t, c.Do(ctx, http.MethodPost, templates, domain.TemplateConfig{Alias: "pathed", Transport: domain.TransportACP, Command: gone,
		EnvAllowlist: []string{"SET_HERE"}}, &saved))
	var took []time.Duration
	for range 10 {
		start := time.Now()
		must(t, c.Do(ctx, http.MethodPut, "/v1/templates/"+saved.ID.String(), api.SaveTemplateRequest{TemplateConfig: saved.TemplateConfig}, nil))
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("a checked template save: p50 %s, max %s", took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}

// probeCLIsAtStart turns back on what startDevEnv turns off for the suite's sake.
const probeCLIsAtStart = "JAM_WORKER_PROBE_CLIS=1"
