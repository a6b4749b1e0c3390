package domain

import (
	"regexp"
	"slices"
	"time"
)

// Node is one machine that runs a `jam worker` (or `jam dev`) and owns what is on its disk.
type Node struct {
	Name        string
	Hostname    string
	PID         int
	Version     string
	DataDir     string
	StartedAt   time.Time
	HeartbeatAt time.Time
	// Adapters are the provider families this node's worker has a runtime adapter for.
	Adapters []Provider
	// MaxRuntimes is how many live runtimes the node may carry (0: no limit).
	MaxRuntimes int
	// Draining: an operator took the node out of service; it takes no new runtime.
	Draining bool
	// Runtimes is the node's placed runtimes (started, or being started) when read.
	Runtimes int
	// Sandbox is the node's `sbx` support as its worker last probed it ("": not probed yet).
	Sandbox SandboxSupport
	// CLIs are the provider CLIs its worker resolved when it last probed them (nil: not probed).
	CLIs []NodeCLI
	// HostStore identifies the directory that holds the node's runtime-host roots: the id in
	// the directory's own identity file and the path the node reaches it at ("": the data
	// directory's own, shared with no node; or a worker from before host stores). Nodes with the same HostStore reach the same host
	// roots at the same paths (a shared filesystem), so a session whose workspace and
	// provider state are all in its host root can run on any of them.
	HostStore string
}

// SharesHostStore reports whether o reaches n's runtime-host roots (at the same paths).
func (n Node) SharesHostStore(o Node) bool { return n.HostStore != "" && n.HostStore == o.HostStore }

// NodeCLI is one provider CLI as a node's worker resolved it, the way a host-native runtime
// there would (the operator's JAM_<COMMAND>_BIN, the pin table, then PATH).
type NodeCLI struct {
	// Command is the catalog command, e.g. "codex".
	Command string `json:"command"`
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
	// Source is where Path came from (explicit, environment, pin, path).
	Source string `json:"source,omitempty"`
	// Problem says why the node cannot run it ("" when it can).
	Problem string `json:"problem,omitempty"`
}

// NodeState is how a node stands for placement.
type NodeState string

// Node states (wire names).
const (
	NodeLive     NodeState = "live"
	NodeDraining NodeState = "draining"
	NodeStale    NodeState = "stale"
)

// State is the node's state at now: stale once three heartbeats were missed, else draining
// when an operator drained it, else live.
func (n Node) State(now time.Time) NodeState {
	switch {
	case now.Sub(n.HeartbeatAt) > NodeStaleAfter:
		return NodeStale
	case n.Draining:
		return NodeDraining
	default:
		return NodeLive
	}
}

// Runs reports whether the node has an adapter for the provider family.
func (n Node) Runs(p Provider) bool { return slices.Contains(n.Adapters, p) }

// MaySandbox reports whether the node may run sandboxed runtimes: its probe found a usable
// `sbx`, or it has not probed yet (a worker probes at start, so that is a few seconds).
func (n Node) MaySandbox() bool { return n.Sandbox == "" || n.Sandbox == SandboxSupported }

// HasCLI reports whether a host-native runtime of command may start on the node: its probe
// resolved the command, or it has not probed it (yet). "" asks for no CLI (a template that
// names its own executable, or a sandboxed runtime, whose CLI is in its image).
func (n Node) HasCLI(command string) bool {
	if command == "" {
		return true
	}
	for _, c := range n.CLIs {
		if c.Command == command {
			return c.Problem == ""
		}
	}
	return true
}

// NodeHeartbeatInterval is how often a worker refreshes its node row: a node whose worker
// died is stale 15 s later, so its rooms can be placed elsewhere well within a minute.
const NodeHeartbeatInterval = 5 * time.Second

// NodeStaleAfter is the heartbeat age after which a node is reported stale: three missed beats.
const NodeStaleAfter = 3 * NodeHeartbeatInterval

// NodeFencedAfter is the heartbeat age after which a stale node that shares a host store has
// killed the runtimes of rooms that may move (its worker fences after two missed beats,
// checking every second and killing at once): only then do other nodes take those rooms on
// the same files.
const NodeFencedAfter = NodeStaleAfter + NodeHeartbeatInterval

var nodeNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidateNodeName accepts host-name-like names; the name becomes part of a task queue name.
func ValidateNodeName(name string) error {
	if !nodeNamePattern.MatchString(name) {
		return &ValidationError{Field: "node", Detail: "must be 1-63 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"}
	}
	return nil
}
