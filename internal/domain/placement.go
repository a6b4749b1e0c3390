package domain

import (
	"fmt"
	"runtime"
	"time"
)

// PlacementPending is how long a placement whose runtime has not started yet holds its slot:
// longer than a wake takes to start a runtime (a sandbox's preparation included), so a wake
// that gave up never holds the slot for long.
const PlacementPending = 15 * time.Minute

// DefaultMaxRuntimes is a worker node's capacity when its operator names none: one runtime
// per 256 MiB of memory (a provider CLI with its children holds a few hundred MiB while a
// turn runs), and no more than 32 per core (idle runtimes cost no CPU, turns do).
func DefaultMaxRuntimes(cores int, memoryBytes uint64) int {
	n := 32 * max(cores, 1)
	if memoryBytes > 0 {
		n = min(n, max(int(memoryBytes/(256<<20)), 1))
	}
	return n
}

// DefaultMaxRuntimesHere is DefaultMaxRuntimes of this machine (memoryBytes: its memory).
func DefaultMaxRuntimesHere(memoryBytes uint64) int {
	return DefaultMaxRuntimes(runtime.NumCPU(), memoryBytes)
}

// Free is how many more runtimes the node may take (-1: no limit).
func (n Node) Free() int {
	if n.MaxRuntimes <= 0 {
		return -1
	}
	return max(n.MaxRuntimes-n.Runtimes, 0)
}

// NodePlacement is where a wake's runtime goes, or why it waits.
type NodePlacement struct {
	Node string `json:"node,omitempty"`
	// Waiting says why no node took the runtime ("" when placed).
	Waiting string `json:"waiting,omitempty"`
	// NoAdapter: nodes are live but none can run the provider.
	NoAdapter bool `json:"no_adapter,omitempty"`
}

// PlacementAsk is what a wake asks of placement.
type PlacementAsk struct {
	// Previous is the node the session's runtime last ran on ("" when none).
	Previous string
	// Pinned: the session's workspace and provider state are on Previous's disk and nowhere
	// else (a host-native runtime that ran there).
	Pinned bool
	// Movable: they are all in the session's runtime-host root (a managed workspace, a
	// provider that keeps its state there), so a node sharing Previous's host store reaches
	// them: the session may run there when Previous is stale, draining, full or cannot run it.
	Movable bool
	// Running: the session's runtime was confirmed on Previous and never released, so it may
	// still run there: the session moves off Previous only once that node is fenced
	// (NodeFencedAfter), never while it is live (store.PlaceRuntime sets it).
	Running bool
	// HostStore is the store the session's host root was last used in (store.PlaceRuntime
	// sets it): only nodes reaching that store may take it from Previous.
	HostStore string
	Provider  Provider
	// Sandboxed: the runtime runs in a sandbox, so it goes to a node with a usable `sbx`.
	Sandboxed bool
	// Command is the provider CLI a host-native runtime resolves on its node (the catalog
	// command; "" when the template names its own executable or the runtime is sandboxed),
	// so it goes to a node where that CLI is installed.
	Command string
}

// eligible: the node can run what the ask needs, as far as its probes tell. The node that
// holds a pinned session's state is always eligible: the session runs there or waits.
func (a PlacementAsk) eligible(n Node) bool {
	if a.Pinned && a.Previous != "" && n.Name == a.Previous {
		return true
	}
	return (!a.Sandboxed || n.MaySandbox()) && n.HasCLI(a.Command)
}

// Place chooses the node for a room session's runtime. nodes carry their runtimes counted
// without this session's own placement. A runtime goes only to nodes that can run it
// (PlacementAsk.eligible: a usable `sbx` for a sandboxed one, the provider CLI installed for a
// host-native one) while any such node is live and runs the provider; when none is, it is
// placed as if every node could, so its start fails with the node's own reason (`sbx`'s, or
// the executable's refusal) instead of waiting for a node that may never come.
func Place(nodes []Node, now time.Time, ask PlacementAsk) NodePlacement {
	able := make([]Node, 0, len(nodes))
	for _, n := range nodes {
		if ask.eligible(n) {
			able = append(able, n)
		}
	}
	if len(able) < len(nodes) {
		for _, n := range able {
			if now.Sub(n.HeartbeatAt) <= NodeStaleAfter && n.Runs(ask.Provider) {
				return place(able, now, ask)
			}
		}
	}
	return place(nodes, now, ask)
}

// StillPlaces reports whether chosen is still a fit place for the ask given nodes as they
// stand now: Place would choose it, or Place chose by load (not the session's own node) and
// chosen is live, undrained, eligible, runs the provider, has a free slot and, with one
// runtime fewer, would be at least as good a choice as the node Place would choose. Wakes that chose from one read re-check under
// the chosen node's lock; the slack of one keeps a burst of them spread within one runtime
// per wave instead of all but one choosing again each time another took a slot.
func StillPlaces(nodes []Node, now time.Time, ask PlacementAsk, chosen string) bool {
	again := Place(nodes, now, ask)
	if again.Node == chosen {
		return true
	}
	// A session that goes back to its node (pinned there, or preferring it) has no
	// alternative; nor has a pinned one that moves, which may go only where its state is.
	if again.Node == "" || (ask.Previous != "" && (again.Node == ask.Previous || ask.Pinned)) {
		return false
	}
	var n, best *Node
	for i := range nodes {
		switch nodes[i].Name {
		case chosen:
			n = &nodes[i]
		case again.Node:
			best = &nodes[i]
		}
	}
	if n == nil || best == nil || now.Sub(n.HeartbeatAt) > NodeStaleAfter || n.Draining || !n.Runs(ask.Provider) ||
		n.Free() == 0 || (!ask.eligible(*n) && ask.eligible(*best)) {
		return false
	}
	// With one runtime fewer, chosen would be at least as good a choice as the best.
	fewer := *n
	fewer.Runtimes = max(fewer.Runtimes-1, 0)
	return !better(best, &fewer, loadScale(nodes))
}

// place chooses among nodes. pinned: the session's workspace and provider state
// are on previous's disk and nowhere else (a host-native runtime that ran there), so it
// runs there or waits for it: while that node is live, even draining (the state cannot leave
// with it) or full, and while it is stale, until it is back. An unpinned session goes back
// to previous while it is live, undrained and has room; otherwise to the live, undrained
// node that runs the provider with the smallest share of its capacity in use (better).
func place(nodes []Node, now time.Time, ask PlacementAsk) NodePlacement {
	previous, pinned, p := ask.Previous, ask.Pinned, ask.Provider
	scale := loadScale(nodes)
	// What the node holds, and the way out when it does not come back: a host-native room
	// can start fresh elsewhere; a sandboxed one's continuity is inspected and reset on its
	// node, so it has none to offer.
	holds, fresh, gone := "workspace and provider state", ", or start it fresh", "; start the room fresh"
	if ask.Sandboxed {
		holds, fresh, gone = "sandbox, workspace and checkpoints", "", ""
	}
	waitsFor := "it"
	if ask.Movable {
		waitsFor = "it or for a live node with room that shares its host store"
	}
	pinned = pinned && previous != ""
	if pinned && ask.Movable {
		if n := movedTo(nodes, now, ask); n != nil {
			return NodePlacement{Node: n.Name}
		}
	}
	var best *Node
	live, runs, full, draining := false, false, 0, 0
	for i := range nodes {
		n := &nodes[i]
		stale := now.Sub(n.HeartbeatAt) > NodeStaleAfter
		if pinned && n.Name == previous {
			switch {
			case stale:
				return NodePlacement{Waiting: fmt.Sprintf("node %s, which holds this room's %s, is not live (last heartbeat %s ago); the room waits for %s%s",
					n.Name, holds, now.Sub(n.HeartbeatAt).Round(time.Second), waitsFor, fresh)}
			case !n.Runs(p):
				return NodePlacement{NoAdapter: true, Waiting: fmt.Sprintf("node %s, which holds this room's workspace, has no runtime adapter for %s", n.Name, p)}
			case n.Free() == 0:
				return NodePlacement{Waiting: fmt.Sprintf("node %s, which holds this room's workspace, is at capacity (%d of %d runtimes); the wake waits for a free slot",
					n.Name, n.Runtimes, n.MaxRuntimes)}
			}
			return NodePlacement{Node: n.Name}
		}
		if stale {
			continue
		}
		live = true
		if !n.Runs(p) {
			continue
		}
		runs = true
		if n.Name == previous && !n.Draining && n.Free() != 0 {
			return NodePlacement{Node: n.Name}
		}
		switch {
		case n.Draining:
			draining++
		case n.Free() == 0:
			full++
		case best == nil || better(n, best, scale):
			best = n
		}
	}
	switch {
	case pinned:
		return NodePlacement{Waiting: fmt.Sprintf("node %s, which holds this room's %s, is gone%s", previous, holds, gone)}
	case best != nil:
		return NodePlacement{Node: best.Name}
	case !live:
		return NodePlacement{Waiting: "no live node to run the runtime on"}
	case !runs:
		return NodePlacement{NoAdapter: true, Waiting: fmt.Sprintf("no live node has a runtime adapter for %s", p)}
	default:
		return NodePlacement{Waiting: fmt.Sprintf("every live node that runs %s is full or draining (%d full, %d draining); the wake waits for a free slot", p, full, draining)}
	}
}

// movedTo is where a movable pinned session runs while its node cannot take it: its own
// node while that is live, undrained, runs the provider and has room; else the best such
// node that can run it and shares its host store; nil when there is none (the session is
// bound to its node as if it could not move, and waits for it). A stale node's rooms move
// only once its fence has surely killed their runtimes (NodeFencedAfter), and a live node's
// only when no runtime of the session may still run there.
func movedTo(nodes []Node, now time.Time, ask PlacementAsk) *Node {
	var prev *Node
	for i := range nodes {
		if nodes[i].Name == ask.Previous {
			prev = &nodes[i]
		}
	}
	// Its files are where it last ran: a node reconfigured since (or a session that never ran
	// in a shared store) moves nowhere.
	if prev == nil || prev.HostStore == "" || prev.HostStore != ask.HostStore {
		return nil
	}
	takes := func(n *Node) bool {
		return now.Sub(n.HeartbeatAt) <= NodeStaleAfter && !n.Draining && n.Runs(ask.Provider) && n.Free() != 0
	}
	if takes(prev) {
		return prev
	}
	switch age := now.Sub(prev.HeartbeatAt); {
	case age > NodeStaleAfter && age <= NodeFencedAfter:
		return nil
	case age <= NodeStaleAfter && ask.Running:
		return nil
	case age <= NodeFencedAfter && ask.Sandboxed && !(age <= NodeStaleAfter && prev.Draining):
		// A sandboxed host moves as a whole, with every member: off a fenced node, or off a
		// draining one once parked (MayRehome; the host refuses while a member runs). A full
		// node keeps it: the wake waits for a slot there.
		return nil
	}
	var best *Node
	scale := loadScale(nodes)
	for i := range nodes {
		n := &nodes[i]
		if n.Name != prev.Name && n.SharesHostStore(*prev) && takes(n) && ask.eligible(*n) && (best == nil || better(n, best, scale)) {
			best = n
		}
	}
	return best
}

// MayRehome reports whether a sandboxed runtime host on from may move to to: from is fenced
// (no heartbeat for NodeFencedAfter, so its fence has killed what ran there) or, for a parked
// host (no member, its sandbox stopped), draining; to is live, undrained, may run sandboxes
// and reaches the same host store, where the host's root (its workspaces, provider state and
// checkpoints) is.
func MayRehome(from, to Node, now time.Time, parked bool) bool {
	leaves := now.Sub(from.HeartbeatAt) > NodeFencedAfter || (parked && from.Draining)
	return leaves && from.Name != to.Name && to.SharesHostStore(from) &&
		now.Sub(to.HeartbeatAt) <= NodeStaleAfter && !to.Draining && to.MaySandbox()
}

// loadScale is the capacity a node without a runtime limit is weighed at: the largest limit
// among nodes, so in a fleet of limited workers an unlimited node (`jam dev` by default)
// takes its share of wakes instead of every one of them; 0 when no node has a limit (their
// runtimes are compared).
func loadScale(nodes []Node) int {
	scale := 0
	for _, n := range nodes {
		scale = max(scale, n.MaxRuntimes)
	}
	return scale
}

// better reports whether a is a better choice than b: the smaller share of its capacity in
// use (an unlimited node's capacity taken as scale), then more free capacity (no limit
// first), then fewer runtimes, then by name.
func better(a, b *Node, scale int) bool {
	ca, cb := a.MaxRuntimes, b.MaxRuntimes
	if ca <= 0 {
		ca = scale
	}
	if cb <= 0 {
		cb = scale
	}
	if ca > 0 && cb > 0 {
		// a.Runtimes/ca against b.Runtimes/cb, in integers.
		if la, lb := a.Runtimes*cb, b.Runtimes*ca; la != lb {
			return la < lb
		}
	}
	fa, fb := a.Free(), b.Free()
	switch {
	case fa != fb && (fa < 0 || fb < 0):
		return fa < 0
	case fa != fb:
		return fa > fb
	case a.Runtimes != b.Runtimes:
		return a.Runtimes < b.Runtimes
	default:
		return a.Name < b.Name
	}
}
