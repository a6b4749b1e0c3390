package workspace_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/workspace"
)

func TestManagedPathsDeriveOnlyFromUUIDs(t *testing.T) {
	t.Parallel()
	l := domain.Layout{Root: "/data"}
	host, session := uuid.New(), uuid.New()
	p, err := workspace.ManagedPaths(l, host)
	if err != nil {
		t.Fatal(err)
	}
	state, err := p.ProviderState(domain.ProviderCodex)
	if err != nil {
		t.Fatal(err)
	}
	for got, want := range map[string]string{
		p.Root:             "/data/runtime-hosts/" + host.String(),
		p.WorkspaceRoot():  "/data/runtime-hosts/" + host.String() + "/workspace-root",
		p.Session(session): "/data/runtime-hosts/" + host.String() + "/workspace-root/sessions/" + session.String(),
		state:              "/data/runtime-hosts/" + host.String() + "/provider-state/codex",
		p.Recovery():       "/data/runtime-hosts/" + host.String() + "/recovery",
		p.ManifestPath():   "/data/runtime-hosts/" + host.String() + "/manifest.json",
	} {
		if got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
	if p.Session(session) != l.SessionWorkspace(host, session) {
		t.Error("the layout and the managed paths disagree on a session workspace")
	}
	if _, err := p.ProviderState("../../etc"); err == nil {
		t.Error("a path-like provider was accepted")
	}
	if _, err := workspace.ManagedPaths(l, uuid.Nil); err == nil {
		t.Error("the nil UUID was accepted as a host")
	}
}

func TestProvisioningIsIdempotentAndPrivate(t *testing.T) {
	t.Parallel()
	p, _ := workspace.ManagedPaths(domain.Layout{Root: t.TempDir()}, uuid.New())
	agent, a, b := uuid.New(), uuid.New(), uuid.New()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			_, errs[i] = workspace.Provision(p, agent, s, domain.ProviderACP, time.Now())
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(p.Session(a), "work.txt"), []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	state, err := workspace.Provision(p, agent, a, domain.ProviderACP, time.Now())
	if err != nil || state != domain.WorkspaceReady {
		t.Fatalf("again: %s %v", state, err)
	}
	if b, _ := os.ReadFile(filepath.Join(p.Session(a), "work.txt")); string(b) != "keep me" {
		t.Fatal("provisioning again touched the workspace")
	}
	for _, dir := range []string{p.Root, p.Session(a), p.Session(b), p.Recovery()} {
		if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v", dir, st.Mode().Perm(), err)
		}
	}
	if st, err := os.Stat(p.ManifestPath()); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("manifest: %v", err)
	}
}

func TestACorruptManifestIsPreservedAndNeedsReconciliation(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"unreadable":    "{not json",
		"another agent": `{"version":1,"runtime_host":"HOST","agent_id":"` + uuid.NewString() + `"}`,
		"another host":  `{"version":1,"runtime_host":"` + uuid.NewString() + `","agent_id":"AGENT"}`,
	} {
		t.Run(name, func(t *testing.T) {
			p, _ := workspace.ManagedPaths(domain.Layout{Root: t.TempDir()}, uuid.New())
			agent := uuid.New()
			body := strings.NewReplacer("HOST", p.Host.String(), "AGENT", agent.String()).Replace(body)
			if err := os.MkdirAll(p.Root, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p.ManifestPath(), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			state, err := workspace.Provision(p, agent, uuid.New(), domain.ProviderACP, time.Now())
			if state != domain.WorkspaceNeedsReconciliation || !errors.Is(err, workspace.ErrManifestCorrupt) {
				t.Fatalf("%s %v", state, err)
			}
			if got, _ := os.ReadFile(p.ManifestPath()); string(got) != body {
				t.Fatalf("the corrupt manifest was rewritten: %s", got)
			}
		})
	}
}
