package domain

import (
	"path/filepath"

	"github.com/google/uuid"
)

// Layout names every path under a node's data directory. Paths below the root are derived
// only from validated UUIDs and node names (ValidateNodeName), never from other names a user
// typed.
type Layout struct {
	Root string
	// Hosts is the host store, the directory of runtime-host roots, when it is not the data
	// directory's own (a shared filesystem nodes reach at the same path).
	Hosts string
}

// HostStore is the directory that holds every runtime-host root.
func (l Layout) HostStore() string {
	if l.Hosts != "" {
		return l.Hosts
	}
	return filepath.Join(l.Root, "runtime-hosts")
}

// APITokenFile holds the generated operator token (mode 0600).
func (l Layout) APITokenFile() string { return filepath.Join(l.Root, "api-token") }

// APIURLFile holds the base URL of the API a running `jam dev` serves (mode 0600), so the
// jam CLI with the same data directory finds it when --listen picked another port.
func (l Layout) APIURLFile() string { return filepath.Join(l.Root, "api-url") }

// StoreFile is the SQLite store used by `jam dev`.
func (l Layout) StoreFile() string { return filepath.Join(l.Root, "jam.db") }

// TemporalFile is the embedded Temporal server's SQLite database used by `jam dev`.
func (l Layout) TemporalFile() string { return filepath.Join(l.Root, "temporal.db") }

// RuntimeHostRoot is the root of one runtime host's files.
func (l Layout) RuntimeHostRoot(host uuid.UUID) string {
	return filepath.Join(l.HostStore(), host.String())
}

// SessionWorkspace is one runtime session's managed workspace on its host.
func (l Layout) SessionWorkspace(host, session uuid.UUID) string {
	return filepath.Join(l.RuntimeHostRoot(host), "workspace-root", "sessions", session.String())
}

// ExportDir is one immutable workspace export, kept outside every runtime-host root.
func (l Layout) ExportDir(export uuid.UUID) string {
	return filepath.Join(l.Root, "workspace-exports", export.String())
}

// SandboxOwnersDir holds the host-side sandbox owner markers.
func (l Layout) SandboxOwnersDir() string { return filepath.Join(l.Root, "cfg", "sandbox-owners") }

// RuntimeEnvDir holds the short-lived env files of sandboxed spawns (deleted once the
// provider started).
func (l Layout) RuntimeEnvDir() string { return filepath.Join(l.Root, "cfg", "runtime-env") }

// ProcessGroupsDir holds one record per provider process group the node's worker started, so
// the next worker can reap what a killed one left behind. node must pass ValidateNodeName.
func (l Layout) ProcessGroupsDir(node string) string {
	return filepath.Join(l.Root, "nodes", node, "process-groups")
}
