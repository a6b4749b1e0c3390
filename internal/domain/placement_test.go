package domain

import (
	"strings"
	"testing"
	"time"
)

func TestPlaceTakesTheLeastLoadedNodeAndKeepsRoomsOnTheirDisk(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	live, stale := now.Add(-time.Second), now.Add(-NodeStaleAfter-time.Second)
	node := func(name string, runtimes, limit int, beat time.Time, draining bool) Node {
		return Node{Name: name, HeartbeatAt: beat, Adapters: []Provider{ProviderACP}, Runtimes: runtimes, MaxRuntimes: limit, Draining: draining}
	}
	cases := []struct {
		name     string
		nodes    []Node
		previous string
		pinned   bool
		want     string
		waiting  string // a substring of the reason, when no node is chosen
	}{
		{"most free", []Node{node("a", 3, 5, live, false), node("b", 1, 5, live, false), node("c", 2, 10, live, false)}, "", false, "c", ""},
		{"tie goes to fewer runtimes, then name", []Node{node("b", 1, 4, live, false), node("a", 1, 4, live, false), node("c", 2, 5, live, false)}, "", false, "a", ""},
		{"the smaller share of capacity in use", []Node{node("a", 3, 10, live, false), node("b", 1, 2, live, false)}, "", false, "a", ""},
		// An unlimited node weighs as much as the largest limited one: it takes its share.
		{"an unlimited node counts as large as the largest limit", []Node{node("a", 0, 50, live, false), node("b", 9, 0, live, false)}, "", false, "a", ""},
		{"an unlimited node with the smaller share", []Node{node("a", 30, 50, live, false), node("b", 9, 0, live, false)}, "", false, "b", ""},
		{"an equal share: no limit first", []Node{node("a", 5, 50, live, false), node("b", 5, 0, live, false)}, "", false, "b", ""},
		{"full and draining nodes are skipped", []Node{node("a", 5, 5, live, false), node("b", 0, 5, live, true), node("c", 4, 5, live, false)}, "", false, "c", ""},
		{"stale nodes are skipped", []Node{node("a", 0, 5, stale, false), node("b", 4, 5, live, false)}, "", false, "b", ""},
		{"every node full or draining", []Node{node("a", 5, 5, live, false), node("b", 0, 5, live, true)}, "", false, "", "1 full, 1 draining"},
		{"no live node", []Node{node("a", 0, 5, stale, false)}, "", false, "", "no live node"},
		{"pinned stays on its draining node", []Node{node("a", 1, 5, live, true), node("b", 0, 5, live, false)}, "a", true, "a", ""},
		{"pinned waits for its full node", []Node{node("a", 5, 5, live, false), node("b", 0, 5, live, false)}, "a", true, "", "is at capacity (5 of 5"},
		{"pinned waits for its stale node", []Node{node("a", 0, 5, stale, false), node("b", 0, 5, live, false)}, "a", true, "", "is not live"},
		{"pinned to a node that is gone", []Node{node("b", 0, 5, live, false)}, "a", true, "", "is gone"},
		{"unpinned goes back to its node while it has room", []Node{node("a", 3, 5, live, false), node("b", 0, 5, live, false)}, "a", false, "a", ""},
		{"unpinned leaves a draining node", []Node{node("a", 0, 5, live, true), node("b", 2, 5, live, false)}, "a", false, "b", ""},
		{"unpinned leaves a stale node", []Node{node("a", 0, 5, stale, false), node("b", 2, 5, live, false)}, "a", false, "b", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Place(c.nodes, now, PlacementAsk{Previous: c.previous, Pinned: c.pinned, Provider: ProviderACP})
			if got.Node != c.want {
				t.Fatalf("placed on %q (%s), want %q", got.Node, got.Waiting, c.want)
			}
			if c.want == "" && !strings.Contains(got.Waiting, c.waiting) {
				t.Fatalf("waiting %q, want it to say %q", got.Waiting, c.waiting)
			}
			if c.want != "" && got.Waiting != "" {
				t.Fatalf("placed with a waiting reason %q", got.Waiting)
			}
		})
	}
}

func TestPlaceSaysWhenNoLiveNodeRunsTheProvider(t *testing.T) {
	now := time.Now()
	got := Place([]Node{{Name: "a", HeartbeatAt: now, Adapters: []Provider{ProviderCodex}}}, now, PlacementAsk{Provider: ProviderACP})
	if got.Node != "" || !got.NoAdapter {
		t.Fatalf("got %+v, want no adapter", got)
	}
}

func TestDefaultCapacityFollowsMemoryAndCores(t *testing.T) {
	for _, c := range []struct {
		cores int
		mem   uint64
		want  int
	}{{2, 24 << 30, 64}, {2, 4 << 30, 16}, {8, 0, 256}, {1, 100 << 20, 1}} {
		if got := DefaultMaxRuntimes(c.cores, c.mem); got != c.want {
			t.Errorf("DefaultMaxRuntimes(%d, %d) = %d, want %d", c.cores, c.mem, got, c.want)
		}
	}
}

func TestSandboxedRuntimesGoOnlyToNodesThatMayRunSandboxes(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	live, stale := now.Add(-time.Second), now.Add(-NodeStaleAfter-time.Second)
	node := func(name string, runtimes int, sb SandboxSupport, beat time.Time) Node {
		return Node{Name: name, HeartbeatAt: beat, Adapters: []Provider{ProviderACP}, Runtimes: runtimes, MaxRuntimes: 5, Sandbox: sb}
	}
	cases := []struct {
		name     string
		nodes    []Node
		previous string
		want     string
		waiting  string
	}{
		{"the emptier node has no sbx", []Node{node("a", 0, SandboxAbsent, live), node("b", 3, SandboxSupported, live)}, "", "b", ""},
		{"a node not probed yet may", []Node{node("a", 0, SandboxDaemonDown, live), node("b", 3, "", live)}, "", "b", ""},
		{"the previous node lost its daemon", []Node{node("a", 0, SandboxDaemonDown, live), node("b", 3, SandboxSupported, live)}, "a", "b", ""},
		{"the sandbox nodes are full: wait for them", []Node{node("a", 0, SandboxTooOld, live), node("b", 5, SandboxSupported, live)}, "", "", "1 full, 0 draining"},
		{"the only sandbox node is stale: as if host-native", []Node{node("a", 0, SandboxAbsent, live), node("b", 0, SandboxSupported, stale)}, "", "a", ""},
		{"no node has sbx: its start says why", []Node{node("a", 1, SandboxAbsent, live), node("b", 0, SandboxAbsent, live)}, "", "b", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Place(c.nodes, now, PlacementAsk{Previous: c.previous, Provider: ProviderACP, Sandboxed: true})
			if got.Node != c.want || (c.want == "" && !strings.Contains(got.Waiting, c.waiting)) {
				t.Fatalf("placed %+v, want node %q (waiting %q)", got, c.want, c.waiting)
			}
			// A host-native runtime ignores sandbox support.
			if hn := Place(c.nodes, now, PlacementAsk{Provider: ProviderACP}); hn.Node == "" && c.want != "" {
				t.Fatalf("host-native placement waits: %+v", hn)
			}
		})
	}
}

func TestHostNativeRuntimesGoOnlyToNodesWithTheirCLI(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	live, stale := now.Add(-time.Second), now.Add(-NodeStaleAfter-time.Second)
	has := []NodeCLI{{Command: "codex", Path: "/usr/bin/codex", Version: "0.169.0"}}
	lacks := []NodeCLI{{Command: "codex", Problem: `executable "codex" refused: not found on PATH`}}
	node := func(name string, runtimes int, clis []NodeCLI, beat time.Time) Node {
		return Node{Name: name, HeartbeatAt: beat, Adapters: []Provider{ProviderCodex}, Runtimes: runtimes, MaxRuntimes: 5, CLIs: clis}
	}
	cases := []struct {
		name    string
		nodes   []Node
		ask     PlacementAsk
		want    string
		waiting string
	}{
		{"the emptier node lacks the CLI", []Node{node("a", 0, lacks, live), node("b", 3, has, live)}, PlacementAsk{Command: "codex"}, "b", ""},
		{"a node not probed yet may", []Node{node("a", 0, lacks, live), node("b", 3, nil, live)}, PlacementAsk{Command: "codex"}, "b", ""},
		{"a CLI the probe did not list may", []Node{node("a", 0, lacks, live), node("b", 3, has, live)}, PlacementAsk{Command: "opencode"}, "a", ""},
		{"the nodes with the CLI are full: wait for them", []Node{node("a", 0, lacks, live), node("b", 5, has, live)}, PlacementAsk{Command: "codex"}, "", "1 full, 0 draining"},
		{"the only node with the CLI is stale: its start says why", []Node{node("a", 0, lacks, live), node("b", 0, has, stale)}, PlacementAsk{Command: "codex"}, "a", ""},
		{"an explicit executable asks for no CLI", []Node{node("a", 0, lacks, live), node("b", 3, has, live)}, PlacementAsk{}, "a", ""},
		{"a pinned session stays with its node", []Node{node("a", 0, lacks, live), node("b", 0, has, live)}, PlacementAsk{Command: "codex", Previous: "a", Pinned: true}, "a", ""},
		{"an unpinned one leaves a node that lost the CLI", []Node{node("a", 0, lacks, live), node("b", 3, has, live)}, PlacementAsk{Command: "codex", Previous: "a"}, "b", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.ask.Provider = ProviderCodex
			got := Place(c.nodes, now, c.ask)
			if got.Node != c.want || (c.want == "" && !strings.Contains(got.Waiting, c.waiting)) {
				t.Fatalf("placed %+v, want node %q (waiting %q)", got, c.want, c.waiting)
			}
		})
	}
}

func TestAChosenNodeStillPlacesWithinOneRuntimeOfTheBest(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	live, stale := now.Add(-time.Second), now.Add(-NodeStaleAfter-time.Second)
	node := func(name string, runtimes, limit int, beat time.Time) Node {
		return Node{Name: name, HeartbeatAt: beat, Adapters: []Provider{ProviderACP}, Runtimes: runtimes, MaxRuntimes: limit}
	}
	drained := node("a", 0, 5, live)
	drained.Draining = true
	cases := []struct {
		name  string
		nodes []Node
		want  bool
	}{
		{"the best", []Node{node("a", 1, 5, live), node("b", 2, 5, live)}, true},
		{"one fewer free slot than the best", []Node{node("a", 2, 5, live), node("b", 1, 5, live)}, true},
		{"two fewer", []Node{node("a", 3, 5, live), node("b", 1, 5, live)}, false},
		{"full", []Node{node("a", 5, 5, live), node("b", 4, 5, live)}, false},
		{"no limits, one runtime more", []Node{node("a", 4, 0, live), node("b", 3, 0, live)}, true},
		{"no limits, two more", []Node{node("a", 5, 0, live), node("b", 3, 0, live)}, false},
		{"the same share of a larger node", []Node{node("a", 4, 10, live), node("b", 2, 5, live)}, true},
		{"unlimited beside a limited one, one more", []Node{node("a", 3, 0, live), node("b", 2, 5, live)}, true},
		{"unlimited beside a limited one, two more", []Node{node("a", 4, 0, live), node("b", 2, 5, live)}, false},
		{"stale", []Node{node("a", 0, 5, stale), node("b", 1, 5, live)}, false},
		{"draining", []Node{drained, node("b", 1, 5, live)}, false},
		{"gone", []Node{node("b", 1, 5, live)}, false},
		{"nothing places", []Node{node("a", 5, 5, live)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := StillPlaces(c.nodes, now, PlacementAsk{Provider: ProviderACP}, "a"); got != c.want {
				t.Fatalf("StillPlaces(a) = %v, want %v", got, c.want)
			}
		})
	}
	// A session going back to its own node has no alternative, however empty another is.
	for _, pinned := range []bool{true, false} {
		ask := PlacementAsk{Provider: ProviderACP, Previous: "b", Pinned: pinned}
		if StillPlaces([]Node{node("a", 0, 5, live), node("b", 1, 5, live)}, now, ask, "a") {
			t.Fatalf("pinned %v: a fits for a session of b", pinned)
		}
	}
}

func TestASandboxedRoomWaitingForItsNodeSaysWhatTheNodeHolds(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	nodes := []Node{{Name: "boxed", HeartbeatAt: now.Add(-time.Minute), Adapters: []Provider{ProviderACP}},
		{Name: "other", HeartbeatAt: now, Adapters: []Provider{ProviderACP}}}
	got := Place(nodes, now, PlacementAsk{Previous: "boxed", Pinned: true, Provider: ProviderACP, Sandboxed: true})
	if got.Node != "" || !strings.Contains(got.Waiting, "node boxed, which holds this room's sandbox") ||
		strings.Contains(got.Waiting, "start it fresh") {
		t.Fatalf("placed %+v", got)
	}
	got = Place(nodes, now, PlacementAsk{Previous: "boxed", Pinned: true, Provider: ProviderACP})
	if got.Node != "" || !strings.Contains(got.Waiting, "workspace and provider state") || !strings.Contains(got.Waiting, "start it fresh") {
		t.Fatalf("host-native placed %+v", got)
	}
}

// A session whose state is all in its host root follows that root: on its own node while it
// can take it, else on a node that shares the host store, else it waits for its node.
func TestAMovableRoomRunsOnANodeSharingItsHostStoreWhileItsNodeCannotTakeIt(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	live, stale := now.Add(-time.Second), now.Add(-NodeFencedAfter-time.Second)
	fencing := now.Add(-NodeStaleAfter - time.Second) // stale, its fence maybe still running
	node := func(name, store string, runtimes int, beat time.Time, draining bool) Node {
		return Node{Name: name, HostStore: store, HeartbeatAt: beat, Adapters: []Provider{ProviderClaude}, Runtimes: runtimes,
			MaxRuntimes: 3, Draining: draining}
	}
	cases := []struct {
		name    string
		nodes   []Node
		movable bool
		running bool // the session's runtime may still run on its node
		want    string
		waiting string
	}{
		{"stays on its live node", []Node{node("a", "s", 2, live, false), node("b", "s", 0, live, false)}, true, false, "a", ""},
		{"moves off its stale node to a sharing one", []Node{node("a", "s", 0, stale, false), node("b", "t", 0, live, false),
			node("c", "s", 2, live, false), node("d", "s", 1, live, false)}, true, true, "d", ""},
		{"waits while a stale node's fence may still run", []Node{node("a", "s", 0, fencing, false), node("b", "s", 0, live, false)},
			true, false, "", "is not live"},
		{"moves off its draining node", []Node{node("a", "s", 0, live, true), node("b", "s", 1, live, false)}, true, false, "b", ""},
		{"moves off its full node", []Node{node("a", "s", 3, live, false), node("b", "s", 1, live, false)}, true, false, "b", ""},
		{"stays while its runtime may still run on its live node", []Node{node("a", "s", 0, live, true), node("b", "s", 0, live, false)},
			true, true, "a", ""},
		{"never to a node of another store", []Node{node("a", "s", 0, stale, false), node("b", "t", 0, live, false)}, true, false, "", "is not live"},
		{"never to a full or draining sharer", []Node{node("a", "s", 0, stale, false), node("b", "s", 3, live, false),
			node("c", "s", 0, live, true)}, true, false, "", "shares its host store"},
		{"never to a sharer without the provider CLI", []Node{node("a", "s", 0, live, true),
			{Name: "b", HostStore: "s", HeartbeatAt: live, Adapters: []Provider{ProviderClaude}, MaxRuntimes: 3,
				CLIs: []NodeCLI{{Command: "claude", Problem: "not found"}}}}, true, false, "a", ""},
		{"a store its files are not in moves nowhere", []Node{node("a", "t", 0, stale, false), node("b", "t", 0, live, false)},
			true, false, "", "is not live"},
		{"an unknown store moves nowhere", []Node{node("a", "", 0, stale, false), node("b", "", 0, live, false)}, true, false, "", "is not live"},
		{"state outside the host root moves nowhere", []Node{node("a", "s", 0, stale, false), node("b", "s", 0, live, false)}, false, false, "", "is not live"},
		{"a draining node keeps what cannot move", []Node{node("a", "s", 0, live, true), node("b", "s", 0, live, false)}, false, false, "a", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ask := PlacementAsk{Previous: "a", Pinned: true, Movable: c.movable, Running: c.running, Provider: ProviderClaude,
				Command: "claude", HostStore: "s"}
			got := Place(c.nodes, now, ask)
			if got.Node != c.want {
				t.Fatalf("placed on %q (%s), want %q", got.Node, got.Waiting, c.want)
			}
			if c.want == "" && !strings.Contains(got.Waiting, c.waiting) {
				t.Fatalf("waiting %q, want it to say %q", got.Waiting, c.waiting)
			}
			if c.want != "" && !StillPlaces(c.nodes, now, ask, c.want) {
				t.Fatalf("%s no longer places where Place put it", c.want)
			}
		})
	}
	// A pinned session takes no slack: another sharer is not as good as the one Place chose.
	nodes := []Node{node("a", "s", 0, stale, false), node("b", "s", 0, live, false), node("c", "s", 1, live, false)}
	if StillPlaces(nodes, now, PlacementAsk{Previous: "a", Pinned: true, Movable: true, Provider: ProviderClaude, HostStore: "s"}, "c") {
		t.Fatal("a moving session re-checked onto a node Place would not choose")
	}
}

// TestASandboxedHostMovesOnlyOffAFencedNodeToASharerThatMaySandbox: a sandboxed room's host
// leaves its node with every member: once that node is fenced, or off a draining node once
// parked; never for a full node (it waits there), and only to a live, undrained sharer whose
// `sbx` works. MayRehome, the store's check, says the same.
func TestASandboxedHostMovesOnlyOffAFencedNodeToASharerThatMaySandbox(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	live, fenced := now.Add(-time.Second), now.Add(-NodeFencedAfter-time.Second)
	fencing := now.Add(-NodeStaleAfter - time.Second)
	node := func(name, store string, runtimes int, beat time.Time, draining bool, sbx SandboxSupport) Node {
		return Node{Name: name, HostStore: store, HeartbeatAt: beat, Adapters: []Provider{ProviderACP}, Runtimes: runtimes,
			MaxRuntimes: 3, Draining: draining, Sandbox: sbx}
	}
	ok, none := SandboxSupported, SandboxAbsent
	cases := []struct {
		name  string
		nodes []Node
		want  string
	}{
		{"stays on its live node", []Node{node("a", "s", 0, live, false, ok), node("b", "s", 0, live, false, ok)}, "a"},
		{"leaves its draining node (once parked)", []Node{node("a", "s", 0, live, true, ok), node("b", "s", 0, live, false, ok)}, "b"},
		{"waits for its full node", []Node{node("a", "s", 3, live, false, ok), node("b", "s", 0, live, false, ok)}, ""},
		{"waits while its node's fence may still run", []Node{node("a", "s", 0, fencing, false, ok), node("b", "s", 0, live, false, ok)}, ""},
		{"moves off its fenced node", []Node{node("a", "s", 0, fenced, false, ok), node("b", "s", 0, live, false, ok)}, "b"},
		{"never to a sharer without sbx", []Node{node("a", "s", 0, fenced, false, ok), node("b", "s", 0, live, false, none)}, ""},
		{"never to a node of another store", []Node{node("a", "s", 0, fenced, false, ok), node("b", "t", 0, live, false, ok)}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ask := PlacementAsk{Previous: "a", Pinned: true, Movable: true, Sandboxed: true, Provider: ProviderACP, HostStore: "s"}
			if got := Place(c.nodes, now, ask); got.Node != c.want {
				t.Fatalf("placed on %q (%s), want %q", got.Node, got.Waiting, c.want)
			}
			// A parked host may leave what a live one may not (a draining node).
			if may := MayRehome(c.nodes[0], c.nodes[1], now, true); may != (c.want == "b") {
				t.Fatalf("MayRehome of a parked host %v, want %v", may, c.want == "b")
			}
			if may := MayRehome(c.nodes[0], c.nodes[1], now, false); may != (c.want == "b" && !c.nodes[0].Draining) {
				t.Fatalf("MayRehome of a live host %v", may)
			}
		})
	}
	if MayRehome(node("a", "s", 0, fenced, false, ok), node("b", "s", 0, live, true, ok), now, true) {
		t.Fatal("a host may move to a draining node")
	}
	// While its own runtime may still run on the draining node, a wake stays there.
	ask := PlacementAsk{Previous: "a", Pinned: true, Movable: true, Running: true, Sandboxed: true, Provider: ProviderACP, HostStore: "s"}
	if got := Place([]Node{node("a", "s", 0, live, true, ok), node("b", "s", 0, live, false, ok)}, now, ask); got.Node != "a" {
		t.Fatalf("placed on %q while its runtime may run on its draining node", got.Node)
	}
}
