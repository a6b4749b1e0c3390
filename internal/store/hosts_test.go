package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

func allocReq(a agentFixture, session uuid.UUID, p domain.Placement, fp string) AllocateRequest {
	return AllocateRequest{AgentID: a.agent, TemplateID: a.template, RuntimeSession: session, Placement: p,
		Node: "node-a", Sandboxed: true, Compatibility: fp, At: time.Now(),
		SandboxName: func(h uuid.UUID) string { return "jam-" + h.String()[:8] }}
}

func hostCount(t *testing.T, s *Store, agent uuid.UUID) int {
	t.Helper()
	var n int
	if err := s.get(context.Background(), &n, `SELECT COUNT(*) FROM runtime_hosts WHERE agent_id = ?`, agent); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSharedPlacementReusesOneCompatibleHostForTwoSessions(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		one, two := newSession(t, s, a), newSession(t, s, a)
		first, err := s.AllocateHost(ctx, allocReq(a, one, domain.PlacementShared, "fp"))
		if err != nil || !first.Created || !first.Joined || first.Host.State != domain.HostProvisioning {
			t.Fatalf("first %+v %v", first, err)
		}
		second, err := s.AllocateHost(ctx, allocReq(a, two, domain.PlacementShared, "fp"))
		if err != nil || second.Created || !second.Joined || second.Host.ID != first.Host.ID {
			t.Fatalf("second %+v %v", second, err)
		}
		// A retry (after a crash) converges on the same record and writes nothing.
		again, err := s.AllocateHost(ctx, allocReq(a, one, domain.PlacementShared, "fp"))
		if err != nil || again.Created || again.Joined || again.Host.ID != first.Host.ID {
			t.Fatalf("retry %+v %v", again, err)
		}
		if n := hostCount(t, s, a.agent); n != 1 {
			t.Fatalf("%d hosts", n)
		}
	})
}

func TestDedicatedPlacementIsStableAndIsolatedPerSession(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		one, two := newSession(t, s, a), newSession(t, s, a)
		h1, err := s.AllocateHost(ctx, allocReq(a, one, domain.PlacementDedicated, "fp"))
		if err != nil || h1.Host.ID != one || h1.Host.SandboxName != "jam-"+one.String()[:8] {
			t.Fatalf("dedicated %+v %v", h1, err)
		}
		h2, err := s.AllocateHost(ctx, allocReq(a, two, domain.PlacementDedicated, "fp"))
		if err != nil || h2.Host.ID != two {
			t.Fatalf("second dedicated %+v %v", h2, err)
		}
		// A crash between the host insert and the membership heals on the same record.
		three := newSession(t, s, a)
		if err := insertHostWith(s, a, three, "fp"); err != nil {
			t.Fatal(err)
		}
		h3, err := s.AllocateHost(ctx, allocReq(a, three, domain.PlacementDedicated, "fp"))
		if err != nil || h3.Created || !h3.Joined || h3.Host.ID != three {
			t.Fatalf("healed %+v %v", h3, err)
		}
	})
}

func insertHostWith(s *Store, a agentFixture, id uuid.UUID, fp string) error {
	_, err := s.exec(context.Background(), `
INSERT INTO runtime_hosts (id, agent_id, template_id, placement, state, node, sandboxed, compatibility, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, a.agent, a.template, domain.PlacementDedicated, domain.HostProvisioning,
		"node-a", true, fp, fixtureTime, fixtureTime)
	return err
}

func TestAnIncompatibleLiveSharedHostIsRejectedWithoutASecondOwner(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		dev := domain.TemplateConfig{Alias: "d", Transport: domain.TransportCodexAppServer, Sandbox: domain.SandboxConfig{Enabled: true}}
		prod := dev
		prod.NetworkProfile = domain.NetworkProduction
		if _, err := s.AllocateHost(ctx, allocReq(a, newSession(t, s, a), domain.PlacementShared, domain.CompatibilityFingerprint(dev, ""))); err != nil {
			t.Fatal(err)
		}
		// The same template with another network profile cannot share the host.
		other := newSession(t, s, a)
		_, err := s.AllocateHost(ctx, allocReq(a, other, domain.PlacementShared, domain.CompatibilityFingerprint(prod, "")))
		if !errors.Is(err, ErrIncompatibleHost) {
			t.Fatalf("incompatible shared: %v", err)
		}
		if n := hostCount(t, s, a.agent); n != 1 {
			t.Fatalf("%d hosts after a refused allocation", n)
		}
		var members int
		if err := s.get(ctx, &members, `SELECT COUNT(*) FROM runtime_host_sessions WHERE runtime_session_id = ?`, other); err != nil || members != 0 {
			t.Fatalf("refused session has %d memberships (%v)", members, err)
		}
		// Another agent's session never lands on this agent's host.
		b := newAgent(t, s)
		if got, err := s.AllocateHost(ctx, allocReq(b, newSession(t, s, b), domain.PlacementShared, domain.CompatibilityFingerprint(dev, ""))); err != nil || got.Host.AgentID != b.agent {
			t.Fatalf("other agent %+v %v", got, err)
		}
	})
}

func TestConcurrentSharedAllocationsConvergeOnOneHost(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		a := newAgent(t, s)
		const n = 8
		sessions := make([]uuid.UUID, n)
		for i := range sessions {
			sessions[i] = newSession(t, s, a)
		}
		hosts := make([]uuid.UUID, n)
		var wg sync.WaitGroup
		for i := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := s.AllocateHost(context.Background(), allocReq(a, sessions[i], domain.PlacementShared, "fp"))
				if err != nil {
					t.Error(err)
					return
				}
				hosts[i] = got.Host.ID
			}()
		}
		wg.Wait()
		for _, h := range hosts {
			if h != hosts[0] {
				t.Fatalf("sessions landed on different hosts: %v", hosts)
			}
		}
		if c := hostCount(t, s, a.agent); c != 1 {
			t.Fatalf("%d hosts", c)
		}
	})
}

// HostFor answers, without writing, which host a session would acquire: placement pins a
// sandboxed wake to that host's node.
func TestHostForFindsTheHostASessionWouldAcquire(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		member, joining, dedicated := newSession(t, s, a), newSession(t, s, a), newSession(t, s, a)
		if _, err := s.HostFor(ctx, allocReq(a, joining, domain.PlacementShared, "fp")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("before any host: %v", err)
		}
		shared, err := s.AllocateHost(ctx, allocReq(a, member, domain.PlacementShared, "fp"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name    string
			session uuid.UUID
			p       domain.Placement
		}{{"a member", member, domain.PlacementShared}, {"a session joining the Shared host", joining, domain.PlacementShared}} {
			if h, err := s.HostFor(ctx, allocReq(a, c.session, c.p, "fp")); err != nil || h.ID != shared.Host.ID || h.Node != "node-a" {
				t.Fatalf("%s: %+v %v", c.name, h, err)
			}
		}
		if n := hostCount(t, s, a.agent); n != 1 {
			t.Fatalf("HostFor wrote: %d hosts", n)
		}
		if _, err := s.HostFor(ctx, allocReq(a, dedicated, domain.PlacementDedicated, "fp")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a Dedicated session before its host: %v", err)
		}
		own, err := s.AllocateHost(ctx, allocReq(a, dedicated, domain.PlacementDedicated, "fp"))
		if err != nil {
			t.Fatal(err)
		}
		if h, err := s.HostFor(ctx, allocReq(a, dedicated, domain.PlacementDedicated, "fp")); err != nil || h.ID != own.Host.ID {
			t.Fatalf("a Dedicated session: %+v %v", h, err)
		}
		// A template edit that changed the host-wide inputs: AllocateHost would refuse the
		// Shared host, and HostFor says so instead of pinning the session to its node.
		if h, err := s.HostFor(ctx, allocReq(a, joining, domain.PlacementShared, "fp-2")); !errors.Is(err, ErrIncompatibleHost) || h.ID != shared.Host.ID {
			t.Fatalf("an incompatible Shared host: %+v %v", h, err)
		}
		if _, err := s.AllocateHost(ctx, allocReq(a, joining, domain.PlacementShared, "fp-2")); !errors.Is(err, ErrIncompatibleHost) {
			t.Fatalf("AllocateHost of the same: %v", err)
		}
	})
}
