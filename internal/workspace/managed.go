// Package workspace holds the managed runtime paths of a node and their provisioning. Every
// path derives from validated UUIDs (and catalog provider names), never from user input.
package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/privatefile"
)

// ManifestVersion is the manifest format this code writes and reads.
const ManifestVersion = 1

// Paths are one runtime host's managed directories.
type Paths struct {
	Host uuid.UUID
	// Root is <data>/runtime-hosts/<host>.
	Root string
}

// ManagedPaths are the paths of one runtime host under a node's data directory.
func ManagedPaths(l domain.Layout, host uuid.UUID) (Paths, error) {
	if host == uuid.Nil {
		return Paths{}, &domain.ValidationError{Field: "runtime_host", Detail: "must be a UUID"}
	}
	return Paths{Host: host, Root: l.RuntimeHostRoot(host)}, nil
}

// WorkspaceRoot is what a sandbox mounts as its primary workspace.
func (p Paths) WorkspaceRoot() string { return filepath.Join(p.Root, "workspace-root") }

// Session is one runtime session's workspace.
func (p Paths) Session(session uuid.UUID) string {
	return filepath.Join(p.WorkspaceRoot(), "sessions", session.String())
}

// ProviderState is where one provider family keeps its continuity state on the host, a
// mount separate from the repository bytes.
func (p Paths) ProviderState(provider domain.Provider) (string, error) {
	if !domain.Providers.Has(provider) {
		return "", &domain.ValidationError{Field: "provider", Detail: fmt.Sprintf("%q is not a catalog provider", provider)}
	}
	return filepath.Join(p.Root, "provider-state", string(provider)), nil
}

// Checkpoints holds the host's immutable provider-state generations.
func (p Paths) Checkpoints() string { return filepath.Join(p.Root, "checkpoints") }

// Recovery holds what recovery must not lose.
func (p Paths) Recovery() string { return filepath.Join(p.Root, "recovery") }

// ManifestPath is the host's manifest.
func (p Paths) ManifestPath() string { return filepath.Join(p.Root, "manifest.json") }

// Manifest says whose files a host root holds.
type Manifest struct {
	Version     int       `json:"version"`
	RuntimeHost uuid.UUID `json:"runtime_host"`
	AgentID     uuid.UUID `json:"agent_id"`
	CreatedAt   time.Time `json:"created_at"`
}

// ErrManifestCorrupt: the host root holds a manifest that is unreadable or names another
// owner. It is preserved as evidence and the workspace needs reconciliation; nothing writes
// over it.
var ErrManifestCorrupt = errors.New("runtime host manifest is corrupt")

// Provision makes the managed layout of one session on its host, idempotently: directories
// (0700) are created when missing and a manifest written when absent. An existing manifest
// must name this host and agent; otherwise the result is domain.WorkspaceNeedsReconciliation
// with ErrManifestCorrupt and the manifest is left exactly as it was.
func Provision(p Paths, agent, session uuid.UUID, provider domain.Provider, now time.Time) (domain.WorkspaceState, error) {
	if agent == uuid.Nil || session == uuid.Nil {
		return "", &domain.ValidationError{Field: "runtime_session", Detail: "agent and session must be UUIDs"}
	}
	state, err := p.ProviderState(provider)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(p.Root, 0o700); err != nil {
		return "", fmt.Errorf("runtime host root %s: %w", p.Host, err)
	}
	if err := checkManifest(p, agent, now); err != nil {
		return domain.WorkspaceNeedsReconciliation, err
	}
	for _, dir := range []string{p.Session(session), state, p.Recovery()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("managed workspace of %s: %w", session, err)
		}
	}
	return domain.WorkspaceReady, nil
}

func checkManifest(p Paths, agent uuid.UUID, now time.Time) error {
	b, err := os.ReadFile(p.ManifestPath())
	if errors.Is(err, os.ErrNotExist) {
		return writeManifest(p, Manifest{Version: ManifestVersion, RuntimeHost: p.Host, AgentID: agent, CreatedAt: now.UTC()})
	}
	if err != nil {
		return fmt.Errorf("manifest of %s: %w", p.Host, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil || m.Version != ManifestVersion {
		return fmt.Errorf("%w: %s is unreadable", ErrManifestCorrupt, p.ManifestPath())
	}
	if m.RuntimeHost != p.Host || m.AgentID != agent {
		return fmt.Errorf("%w: %s names host %s of agent %s", ErrManifestCorrupt, p.ManifestPath(), m.RuntimeHost, m.AgentID)
	}
	return nil
}

// writeManifest creates the manifest only if none exists; when a concurrent provision wrote
// one first, that one is checked instead.
func writeManifest(p Paths, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	created, err := privatefile.Create(p.ManifestPath(), b)
	if err != nil {
		return fmt.Errorf("manifest of %s: %w", p.Host, err)
	}
	if !created {
		return checkManifest(p, m.AgentID, m.CreatedAt)
	}
	return nil
}
