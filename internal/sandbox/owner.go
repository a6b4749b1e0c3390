package sandbox

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/privatefile"
)

// OwnerKind says which record owns a sandbox.
type OwnerKind string

const (
	// OwnerRuntimeHost is the canonical owner, and the only one a Shared host has.
	OwnerRuntimeHost OwnerKind = "runtime_host"
	// OwnerRuntimeSession is the compatibility shape of the older per-session path.
	OwnerRuntimeSession OwnerKind = "runtime_session"
)

// OwnerKey identifies the owner of a sandbox.
type OwnerKey struct {
	Kind    OwnerKind `json:"kind"`
	AgentID uuid.UUID `json:"agent_id"`
	// ID is the runtime host (or, for the legacy shape, runtime session) UUID.
	ID uuid.UUID `json:"id"`
}

// Plan is the exact creation intent of a sandbox; reuse and cleanup compare it whole.
type Plan struct {
	Owner      OwnerKey `json:"owner"`
	Name       string   `json:"name"`
	Agent      string   `json:"agent"`
	Workspace  string   `json:"workspace,omitempty"`
	Additional []string `json:"additional,omitempty"`
	ReadOnly   []string `json:"read_only,omitempty"`
	Kits       []string `json:"kits,omitempty"`
	StaticMCP  []string `json:"static_mcp,omitempty"`
	Clone      bool     `json:"clone,omitempty"`
	// ConfigurationSource is jam_managed or docker_environment.
	ConfigurationSource string `json:"configuration_source"`
}

// Match is how a stored plan relates to a requested one.
type Match int

const (
	MatchNone Match = iota
	MatchExact
	// MatchDedicatedSessionCompatibility: a legacy RuntimeSession owner whose session UUID
	// equals the requested Dedicated host's UUID (the allocator names a Dedicated host after
	// its session).
	MatchDedicatedSessionCompatibility
)

// Compare classifies stored against requested.
func Compare(stored, requested Plan) Match {
	if planEqual(stored, requested) {
		return MatchExact
	}
	if stored.Owner.Kind == OwnerRuntimeSession && requested.Owner.Kind == OwnerRuntimeHost &&
		stored.Owner.AgentID == requested.Owner.AgentID && stored.Owner.ID == requested.Owner.ID {
		s := stored
		s.Owner = requested.Owner
		if planEqual(s, requested) {
			return MatchDedicatedSessionCompatibility
		}
	}
	return MatchNone
}

func planEqual(a, b Plan) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// Marker is the host-side owner marker: the authoritative plan, the nonce the guest holds,
// and the digest of the MCP registrations the sandbox was made with.
type Marker struct {
	Plan      Plan   `json:"plan"`
	Nonce     string `json:"nonce"`
	MCPDigest string `json:"mcp_digest"`
	// Pending: the intent to create, written before `sbx create`; cleared once the guest holds
	// the nonce. A crash in between leaves it, and the next ensure converges on that sandbox.
	Pending bool `json:"pending,omitempty"`
	// PendingSince is when the intent was written: a sandbox Docker reports as created
	// before it cannot be the one this intent created.
	PendingSince *time.Time `json:"pending_since,omitempty"`
}

// GuestMarker is what the guest holds: only the nonce and the name it was written for.
type GuestMarker struct {
	Name  string `json:"name"`
	Nonce string `json:"nonce"`
}

// NewNonce is a fresh random nonce.
func NewNonce() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("owner nonce: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Markers keeps host owner markers in one directory (<data>/cfg/sandbox-owners).
type Markers struct{ Dir string }

func (m Markers) path(name string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return filepath.Join(m.Dir, name+".json"), nil
}

// Write stores a marker, mode 0600, atomically (a reader sees the old file or the new one).
func (m Markers) Write(mk Marker) error {
	p, err := m.path(mk.Plan.Name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(m.Dir, 0o700); err != nil {
		return fmt.Errorf("owner marker directory: %w", err)
	}
	b, err := json.MarshalIndent(mk, "", "  ")
	if err != nil {
		return err
	}
	if err := privatefile.Replace(p, b); err != nil {
		return fmt.Errorf("owner marker %s: %w", mk.Plan.Name, err)
	}
	return nil
}

// ErrNoMarker: no host owner marker for the name.
var ErrNoMarker = errors.New("no owner marker")

// Read loads a marker.
func (m Markers) Read(name string) (Marker, error) {
	p, err := m.path(name)
	if err != nil {
		return Marker{}, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return Marker{}, fmt.Errorf("sandbox %s: %w", name, ErrNoMarker)
	}
	if err != nil {
		return Marker{}, err
	}
	var mk Marker
	if err := json.Unmarshal(b, &mk); err != nil {
		return Marker{}, fmt.Errorf("owner marker %s: %w", name, err)
	}
	return mk, nil
}

// Remove drops a marker; an absent one is already gone.
func (m Markers) Remove(name string) error {
	p, err := m.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ErrOwnershipMismatch: the sandbox is not provably the one the plan describes. Nothing may
// reuse or remove it.
var ErrOwnershipMismatch = errors.New("sandbox ownership mismatch")

// VerifyReuse checks a sandbox before a provider starts in it: plan, MCP digest and the
// live guest nonce must all match.
func VerifyReuse(mk Marker, requested Plan, mcpDigest string, guest []byte) (Match, error) {
	match, err := VerifyCleanup(mk, requested, guest)
	if err != nil {
		return MatchNone, err
	}
	if mk.MCPDigest != mcpDigest {
		return MatchNone, fmt.Errorf("%w: sandbox %s was made with other MCP registrations", ErrOwnershipMismatch, requested.Name)
	}
	return match, nil
}

// VerifyCleanup checks a sandbox before it is stopped or removed: plan and live guest nonce
// (not the MCP digest, so markers older than digests stay removable).
func VerifyCleanup(mk Marker, requested Plan, guest []byte) (Match, error) {
	match := Compare(mk.Plan, requested)
	if match == MatchNone {
		return MatchNone, fmt.Errorf("%w: sandbox %s has another plan", ErrOwnershipMismatch, requested.Name)
	}
	var g GuestMarker
	if err := json.Unmarshal(bytes.TrimSpace(guest), &g); err != nil || g.Nonce == "" || g.Nonce != mk.Nonce || g.Name != requested.Name {
		return MatchNone, fmt.Errorf("%w: sandbox %s does not hold Jam's nonce", ErrOwnershipMismatch, requested.Name)
	}
	return match, nil
}
