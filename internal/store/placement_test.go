package store

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

func TestWakesAtOnceNeverTakeMoreSlotsThanANodeHas(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		registerNodes(t, s, domain.ProviderACP, 3, "n1", "n2")
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			placed = map[string][]uuid.UUID{}
			waited int
		)
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := uuid.New()
				pl, err := s.PlaceRuntime(ctx, id, domain.PlacementAsk{Provider: domain.ProviderACP})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if pl.Node == "" {
					waited++
				} else {
					placed[pl.Node] = append(placed[pl.Node], id)
				}
			}()
		}
		wg.Wait()
		if len(placed["n1"]) != 3 || len(placed["n2"]) != 3 || waited != 4 {
			t.Fatalf("placed %d on n1, %d on n2, %d waited; want 3, 3, 4", len(placed["n1"]), len(placed["n2"]), waited)
		}
		nodes, err := s.ListNodes(ctx)
		if err != nil || nodes[0].Runtimes != 3 || nodes[1].Runtimes != 3 {
			t.Fatalf("nodes %+v %v", nodes, err)
		}

		// A runtime that started keeps its slot; one that ended frees it for the next wake.
		if err := s.ConfirmPlacement(ctx, placed["n1"][0], "n1"); err != nil {
			t.Fatal(err)
		}
		if err := s.ReleasePlacement(ctx, placed["n1"][1], "n1"); err != nil {
			t.Fatal(err)
		}
		next := uuid.New()
		if pl, err := s.PlaceRuntime(ctx, next, domain.PlacementAsk{Provider: domain.ProviderACP}); err != nil || pl.Node != "n1" {
			t.Fatalf("after a release: %+v %v, want n1", pl, err)
		}
		// Placing a session again does not count its own earlier slot.
		if pl, err := s.PlaceRuntime(ctx, next, domain.PlacementAsk{Previous: "n1", Provider: domain.ProviderACP}); err != nil || pl.Node != "n1" {
			t.Fatalf("placing again: %+v %v, want n1", pl, err)
		}

		// A drained node takes no new runtime; a restarted worker starts with no slot held.
		if n, err := s.SetNodeDraining(ctx, "n2", true); err != nil || !n.Draining {
			t.Fatalf("drain: %+v %v", n, err)
		}
		// Only slots taken before the worker started are its predecessor's.
		if err := s.ClearNodePlacements(ctx, "n2", time.Now().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n, err := s.GetNode(ctx, "n2"); err != nil || n.Runtimes != 3 {
			t.Fatalf("n2 after clearing older slots: %+v %v, want its 3 slots kept", n, err)
		}
		started, err := s.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ClearNodePlacements(ctx, "n2", started.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if n, err := s.GetNode(ctx, "n2"); err != nil || n.Runtimes != 0 {
			t.Fatalf("n2 after its worker started: %+v %v, want no slot", n, err)
		}
		if pl, err := s.PlaceRuntime(ctx, uuid.New(), domain.PlacementAsk{Provider: domain.ProviderACP}); err != nil || pl.Node != "" || pl.Waiting == "" {
			t.Fatalf("with n1 full and n2 drained: %+v %v, want a waiting reason", pl, err)
		}
		if _, err := s.SetNodeDraining(ctx, "n2", false); err != nil {
			t.Fatal(err)
		}
		if pl, err := s.PlaceRuntime(ctx, uuid.New(), domain.PlacementAsk{Provider: domain.ProviderACP}); err != nil || pl.Node != "n2" {
			t.Fatalf("after undrain: %+v %v, want n2", pl, err)
		}
		if _, err := s.SetNodeDraining(ctx, "absent", true); err == nil {
			t.Fatal("draining an unknown node succeeded")
		}
	})
}

func TestSandboxedWakesGoToTheNodeWhoseSbxWorks(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		registerNodes(t, s, domain.ProviderACP, 0, "n1", "n2")
		// n1 is emptier but its daemon is down; n2's sbx works.
		if err := s.SetNodeSandbox(ctx, "n1", domain.SandboxDaemonDown); err != nil {
			t.Fatal(err)
		}
		if err := s.SetNodeSandbox(ctx, "n2", domain.SandboxSupported); err != nil {
			t.Fatal(err)
		}
		if n, err := s.GetNode(ctx, "n1"); err != nil || n.Sandbox != domain.SandboxDaemonDown {
			t.Fatalf("n1 %+v %v", n, err)
		}
		// A host-native runtime whose disk is n2's makes n1 the emptier node.
		if pl, err := s.PlaceRuntime(ctx, uuid.New(), domain.PlacementAsk{Previous: "n2", Pinned: true, Provider: domain.ProviderACP}); err != nil || pl.Node != "n2" {
			t.Fatalf("pinned: %+v %v", pl, err)
		}
		if pl, err := s.PlaceRuntime(ctx, uuid.New(), domain.PlacementAsk{Provider: domain.ProviderACP, Sandboxed: true}); err != nil || pl.Node != "n2" {
			t.Fatalf("sandboxed: %+v %v, want n2", pl, err)
		}
		if pl, err := s.PlaceRuntime(ctx, uuid.New(), domain.PlacementAsk{Provider: domain.ProviderACP}); err != nil || pl.Node != "n1" {
			t.Fatalf("host-native: %+v %v, want the emptier n1", pl, err)
		}
		if err := s.SetNodeSandbox(ctx, "gone", domain.SandboxSupported); err == nil {
			t.Fatal("recording sandbox support of an unknown node succeeded")
		}
	})
}

func TestHostNativeWakesGoToTheNodeWithTheProviderCLI(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		registerNodes(t, s, domain.ProviderCodex, 0, "n1", "n2")
		if n, err := s.GetNode(ctx, "n1"); err != nil || n.CLIs != nil {
			t.Fatalf("a registered node reads as probed: %+v %v", n, err)
		}
		// n1 is first by name on an even load but has no codex; n2 has it.
		lacks := []domain.NodeCLI{{Command: "codex", Problem: `executable "codex" refused: not found on PATH (3 directories searched)`}}
		has := []domain.NodeCLI{{Command: "codex", Path: "/opt/codex", Version: "0.169.0", Source: "path"}}
		if err := s.SetNodeCLIs(ctx, "n1", lacks); err != nil {
			t.Fatal(err)
		}
		if err := s.SetNodeCLIs(ctx, "n2", has); err != nil {
			t.Fatal(err)
		}
		if n, err := s.GetNode(ctx, "n2"); err != nil || !slices.Equal(n.CLIs, has) {
			t.Fatalf("n2 %+v %v", n, err)
		}
		if pl, err := s.PlaceRuntime(ctx, uuid.New(), domain.PlacementAsk{Provider: domain.ProviderCodex, Command: "codex"}); err != nil || pl.Node != "n2" {
			t.Fatalf("placed %+v %v, want n2", pl, err)
		}
		// A probe that found nothing is recorded as probed.
		if err := s.SetNodeCLIs(ctx, "n1", nil); err != nil {
			t.Fatal(err)
		}
		if n, err := s.GetNode(ctx, "n1"); err != nil || n.CLIs == nil || len(n.CLIs) != 0 {
			t.Fatalf("n1 after an empty probe %+v %v", n, err)
		}
		// Registering again (a restart, perhaps with another PATH) forgets the probe.
		if _, err := s.RegisterNode(ctx, domain.Node{Name: "n2", Hostname: "n2", PID: 2, DataDir: "/n2",
			Adapters: []domain.Provider{domain.ProviderCodex}}); err != nil {
			t.Fatal(err)
		}
		if n, err := s.GetNode(ctx, "n2"); err != nil || n.CLIs != nil {
			t.Fatalf("n2 after registering again %+v %v", n, err)
		}
		if err := s.SetNodeCLIs(ctx, "gone", has); !errors.Is(err, ErrNotFound) {
			t.Fatalf("recording the CLIs of an unknown node: %v", err)
		}
	})
}

// A room whose state is all in its host root follows the host store: the nodes record the
// store they reach, and a wake whose node drained goes to the node sharing that store, never
// to one that merely has room.
func TestAMovableWakeGoesToTheNodeSharingItsHostStore(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		for name, hosts := range map[string]string{"n1": "id-1:/shared", "n2": "id-2:/elsewhere", "n3": "id-1:/shared"} {
			if _, err := s.RegisterNode(ctx, domain.Node{Name: name, Hostname: name, PID: 1, DataDir: "/" + name,
				Adapters: []domain.Provider{domain.ProviderClaude}, MaxRuntimes: 5, HostStore: hosts}); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := s.GetNode(ctx, "n3"); err != nil || n.HostStore != "id-1:/shared" {
			t.Fatalf("n3 %+v %v", n, err)
		}
		session := newSession(t, s, newAgent(t, s))
		ask := domain.PlacementAsk{Previous: "n1", Pinned: true, Movable: true, Provider: domain.ProviderClaude}
		if pl, err := s.PlaceRuntime(ctx, session, ask); err != nil || pl.Node != "n1" {
			t.Fatalf("placed %+v %v, want its own n1", pl, err)
		}
		// It never ran in the shared store: its files are not there, so it moves nowhere.
		if _, err := s.SetNodeDraining(ctx, "n1", true); err != nil {
			t.Fatal(err)
		}
		if pl, err := s.PlaceRuntime(ctx, session, ask); err != nil || pl.Node != "n1" {
			t.Fatalf("placed %+v %v before it ever ran in the store, want n1", pl, err)
		}
		if _, err := s.SetNodeDraining(ctx, "n1", false); err != nil {
			t.Fatal(err)
		}
		// n3 carries two runtimes, n2 none: n2 has more room but not the room's files.
		for range 2 {
			if pl, err := s.PlaceRuntime(ctx, uuid.New(), domain.PlacementAsk{Previous: "n3", Pinned: true, Provider: domain.ProviderClaude}); err != nil || pl.Node != "n3" {
				t.Fatalf("filler placed %+v %v", pl, err)
			}
		}
		if _, err := s.SetNodeDraining(ctx, "n1", true); err != nil {
			t.Fatal(err)
		}
		// Its runtime started on n1 (recording the store its host root is in) and was never
		// released: it may still run there, so the session stays until it is.
		if err := s.ConfirmPlacement(ctx, session, "n1"); err != nil {
			t.Fatal(err)
		}
		var recorded string
		if err := s.get(ctx, &recorded, `SELECT host_store FROM runtime_sessions WHERE id = ?`, session); err != nil || recorded != "id-1:/shared" {
			t.Fatalf("recorded host store %q, %v", recorded, err)
		}
		if pl, err := s.PlaceRuntime(ctx, session, ask); err != nil || pl.Node != "n1" {
			t.Fatalf("placed %+v %v while its runtime may run on n1, want n1", pl, err)
		}
		if err := s.ReleasePlacement(ctx, session, "n1"); err != nil {
			t.Fatal(err)
		}
		if pl, err := s.PlaceRuntime(ctx, session, ask); err != nil || pl.Node != "n3" {
			t.Fatalf("placed %+v %v after n1 drained, want n3 (shares its host store)", pl, err)
		}
	})
}

// Wakes at the same instant spread over the nodes as if placed one at a time: each takes the
// node with the smallest share of its capacity in use given the slots the others took, not
// the emptiest node of a read they all made before any of them took a slot. An unlimited node
// (`jam dev` by default) in a fleet of limited workers takes its share, not every wake.
func TestWakesAtOnceSpreadEvenlyOverTheNodes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		limits map[string]int
	}{
		{"three limited nodes", map[string]int{"n1": 15, "n2": 15, "n3": 15}},
		{"an unlimited node and two limited ones", map[string]int{"dev": 0, "n2": 15, "n3": 15}},
	} {
		t.Run(c.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, s *Store) {
				ctx := context.Background()
				for name, limit := range c.limits {
					registerNodes(t, s, domain.ProviderACP, limit, name)
				}
				var (
					wg     sync.WaitGroup
					mu     sync.Mutex
					placed = map[string]int{}
				)
				start := make(chan struct{})
				for range 30 {
					wg.Go(func() {
						<-start
						pl, err := s.PlaceRuntime(ctx, uuid.New(), domain.PlacementAsk{Provider: domain.ProviderACP})
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						placed[pl.Node]++
						mu.Unlock()
					})
				}
				close(start)
				wg.Wait()
				for n := range c.limits {
					if placed[n] < 8 || placed[n] > 12 {
						t.Fatalf("placed %v: want 10 each within 20%%", placed)
					}
				}
			})
		})
	}
}

// registerNodes registers nodes that run provider, each carrying at most maxRuntimes (0: no
// limit).
func registerNodes(t testing.TB, s *Store, provider domain.Provider, maxRuntimes int, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := s.RegisterNode(context.Background(), domain.Node{Name: name, Hostname: name, PID: 1, DataDir: "/" + name,
			Adapters: []domain.Provider{provider}, MaxRuntimes: maxRuntimes}); err != nil {
			t.Fatal(err)
		}
	}
}
