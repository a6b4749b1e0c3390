package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jam-dev/jam/internal/domain"
)

// Manager creates, verifies, parks and removes Jam's sandboxes on one node. Every mutation
// of an existing sandbox is preceded by proof of ownership: the host marker's plan and the
// nonce the guest holds. A sandbox without that proof is never adopted, stopped or removed.
type Manager struct {
	Driver  *Driver
	Markers MarkerStore
	// Network, when set, is the sandboxes' network journal: removing a sandbox removes
	// the rules Jam owns in it first.
	Network *NetworkJournal
}

// MarkerStore keeps host owner markers; Markers is the one on disk.
type MarkerStore interface {
	Read(name string) (Marker, error)
	Write(Marker) error
	Remove(name string) error
	Names() ([]string, error)
}

// MCPDigest is the digest of a plan's static MCP registrations, stored in the marker so reuse
// notices registrations that changed under a sandbox.
func MCPDigest(p Plan) string {
	servers := slices.Sorted(slices.Values(p.StaticMCP))
	sum := sha256.Sum256([]byte(strings.Join(servers, "\n")))
	return hex.EncodeToString(sum[:])
}

// EnsureResult says what Ensure did.
type EnsureResult struct {
	Created bool  `json:"created"`
	Fenced  bool  `json:"fenced"`
	Match   Match `json:"match"`
}

// find returns the sandbox named name, nil when Docker has none.
func (m *Manager) find(ctx context.Context, name string) (*Sandbox, error) {
	list, err := m.Driver.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i], nil
		}
	}
	return nil, nil
}

// Ensure makes the plan's sandbox exist and proves it is Jam's before any provider starts in
// it: an existing sandbox is reused only when the host marker's plan, the MCP digest and the
// live guest nonce all match; an absent one is created with fresh evidence. With fence, a
// running sandbox (no member holds it, so whatever runs in it is an orphan of a crash) is
// verified and stopped first.
func (m *Manager) Ensure(ctx context.Context, plan Plan, fence bool) (EnsureResult, error) {
	if err := ValidateName(plan.Name); err != nil {
		return EnsureResult{}, err
	}
	digest := MCPDigest(plan)
	sb, err := m.find(ctx, plan.Name)
	if err != nil {
		return EnsureResult{}, fmt.Errorf("ensure sandbox %s: %w", plan.Name, err)
	}
	mk, mkErr := m.Markers.Read(plan.Name)
	if mkErr != nil && !errors.Is(mkErr, ErrNoMarker) {
		return EnsureResult{}, fmt.Errorf("%w: sandbox %s: unreadable owner marker: %v", ErrOwnershipMismatch, plan.Name, mkErr)
	}
	hasMarker := mkErr == nil
	if sb == nil {
		return m.create(ctx, plan, digest, mk, hasMarker)
	}
	if !hasMarker {
		return EnsureResult{}, fmt.Errorf("%w: sandbox %s exists but no owner marker proves Jam made it", ErrOwnershipMismatch, plan.Name)
	}
	if mk.Pending {
		return m.finishPending(ctx, plan, mk, *sb)
	}
	var out EnsureResult
	if fence && sb.Status == domain.SandboxRunning {
		guest, err := m.Driver.ReadGuestNonce(ctx, plan.Name)
		if err != nil {
			return EnsureResult{}, fmt.Errorf("fence sandbox %s: read guest nonce: %w", plan.Name, err)
		}
		if _, err := VerifyCleanup(mk, plan, guest); err != nil {
			return EnsureResult{}, err
		}
		if err := m.Driver.Stop(ctx, plan.Name); err != nil {
			return EnsureResult{}, fmt.Errorf("fence sandbox %s: %w", plan.Name, err)
		}
		out.Fenced = true
	}
	guest, err := m.Driver.ReadGuestNonce(ctx, plan.Name)
	if err != nil {
		return EnsureResult{}, fmt.Errorf("verify sandbox %s: read guest nonce: %w", plan.Name, err)
	}
	if out.Match, err = VerifyReuse(mk, plan, digest, guest); err != nil {
		return EnsureResult{}, err
	}
	if out.Match == MatchDedicatedSessionCompatibility {
		// Verified: record the canonical host-owned shape so the next reuse is exact.
		mk.Plan = plan
		if err := m.Markers.Write(mk); err != nil {
			return EnsureResult{}, err
		}
	}
	return out, nil
}

// create records the intent (a pending marker with a fresh nonce) before `sbx create`, then
// hands the guest its nonce and publishes the marker. A failure to publish removes the
// just-created sandbox, so no sandbox exists that Jam cannot prove it owns.
func (m *Manager) create(ctx context.Context, plan Plan, digest string, old Marker, hadMarker bool) (EnsureResult, error) {
	nonce := old.Nonce
	if !hadMarker || !old.Pending || Compare(old.Plan, plan) != MatchExact {
		// A finished marker of a sandbox Docker no longer has is dropped without a nonce
		// check (there is nothing left to prove); a new intent gets a new nonce.
		var err error
		if nonce, err = NewNonce(); err != nil {
			return EnsureResult{}, err
		}
	}
	since := time.Now().UTC()
	if hadMarker && old.Pending && old.PendingSince != nil && nonce == old.Nonce {
		since = *old.PendingSince
	}
	mk := Marker{Plan: plan, Nonce: nonce, MCPDigest: digest, Pending: true, PendingSince: &since}
	if err := m.Markers.Write(mk); err != nil {
		return EnsureResult{}, err
	}
	spec := CreateSpec{Name: plan.Name, Agent: plan.Agent, Workspace: plan.Workspace, Clone: plan.Clone, Kits: plan.Kits}
	spec.Extra = append(spec.Extra, plan.Additional...)
	for _, ro := range plan.ReadOnly {
		spec.Extra = append(spec.Extra, ro+":ro")
	}
	if err := m.Driver.Create(ctx, spec); err != nil {
		// When Docker has no such sandbox the intent is void and goes; when it has one (it
		// may have made it after all) the intent stays, and the next ensure converges on it
		// only with proof that it was made after the intent.
		if sb, ferr := m.find(context.WithoutCancel(ctx), plan.Name); ferr == nil && sb == nil {
			_ = m.Markers.Remove(plan.Name)
		}
		return EnsureResult{}, fmt.Errorf("create sandbox %s: %w", plan.Name, err)
	}
	return m.publish(ctx, plan, mk, true)
}

// pendingSlack tolerates the coarse clocks of Docker's creation timestamps.
const pendingSlack = 2 * time.Second

// finishPending converges after a crash between `sbx create` and the published marker: the
// sandbox named by Jam's own recorded intent is completed when its guest holds no nonce or
// this intent's nonce; any other nonce is not Jam's.
func (m *Manager) finishPending(ctx context.Context, plan Plan, mk Marker, sb Sandbox) (EnsureResult, error) {
	if Compare(mk.Plan, plan) != MatchExact {
		return EnsureResult{}, fmt.Errorf("%w: sandbox %s was intended with another plan", ErrOwnershipMismatch, plan.Name)
	}
	// Docker's creation time must not precede the intent (with a little clock slack): an
	// older sandbox of the same name was made by someone else.
	if mk.PendingSince == nil || sb.CreatedAt == nil || sb.CreatedAt.Before(mk.PendingSince.Add(-pendingSlack)) {
		return EnsureResult{}, fmt.Errorf("%w: sandbox %s cannot be shown to be the one Jam intended to create", ErrOwnershipMismatch, plan.Name)
	}
	guest, err := m.Driver.ReadGuestNonce(ctx, plan.Name)
	var cmdErr *CommandError
	switch {
	case errors.As(err, &cmdErr):
		// No readable nonce file in the guest: the crash came before the guest got it.
	case err != nil:
		return EnsureResult{}, fmt.Errorf("verify sandbox %s: read guest nonce: %w", plan.Name, err)
	default:
		var g GuestMarker
		if json.Unmarshal(guest, &g) != nil || g.Nonce != mk.Nonce || g.Name != plan.Name {
			return EnsureResult{}, fmt.Errorf("%w: sandbox %s holds a nonce Jam did not write", ErrOwnershipMismatch, plan.Name)
		}
	}
	return m.publish(ctx, plan, mk, true)
}

// publish writes the guest nonce and then the finished marker.
func (m *Manager) publish(ctx context.Context, plan Plan, mk Marker, created bool) (EnsureResult, error) {
	doc, err := json.Marshal(GuestMarker{Name: plan.Name, Nonce: mk.Nonce})
	if err != nil {
		return EnsureResult{}, err
	}
	if err := m.Driver.WriteGuestNonce(ctx, plan.Name, doc); err != nil {
		return EnsureResult{}, fmt.Errorf("write guest nonce of %s: %w", plan.Name, err)
	}
	mk.Pending = false
	if err := m.Markers.Write(mk); err != nil {
		if rmErr := m.Driver.Remove(context.WithoutCancel(ctx), plan.Name); rmErr != nil {
			// The pending marker (still on disk) makes the next ensure converge on it.
			return EnsureResult{}, fmt.Errorf("publish owner marker of %s: %w (and removing the sandbox failed: %v)", plan.Name, err, rmErr)
		}
		_ = m.Markers.Remove(plan.Name)
		return EnsureResult{}, fmt.Errorf("publish owner marker of %s (sandbox removed): %w", plan.Name, err)
	}
	return EnsureResult{Created: created, Match: MatchExact}, nil
}

// owned proves the sandbox named by plan is Jam's: the stored marker's plan is the one the
// caller names (by owner and name, not rebuilt from a template) and the guest holds its nonce.
func (m *Manager) owned(ctx context.Context, owner OwnerKey, name string) (Marker, error) {
	mk, err := m.Markers.Read(name)
	if err != nil {
		return Marker{}, fmt.Errorf("%w: %v", ErrOwnershipMismatch, err)
	}
	want := mk.Plan
	want.Owner, want.Name = owner, name
	guest, err := m.Driver.ReadGuestNonce(ctx, name)
	if err != nil {
		return Marker{}, fmt.Errorf("verify sandbox %s: read guest nonce: %w", name, err)
	}
	if _, err := VerifyCleanup(mk, want, guest); err != nil {
		return Marker{}, err
	}
	return mk, nil
}

// Park stops the sandbox once its ownership is proven. An absent or stopped sandbox is
// already parked.
func (m *Manager) Park(ctx context.Context, owner OwnerKey, name string) error {
	sb, err := m.find(ctx, name)
	if err != nil {
		return fmt.Errorf("park sandbox %s: %w", name, err)
	}
	if sb == nil || sb.Status != domain.SandboxRunning {
		return nil
	}
	if _, err := m.owned(ctx, owner, name); err != nil {
		return err
	}
	if err := m.Driver.Stop(ctx, name); err != nil {
		return fmt.Errorf("park sandbox %s: %w", name, err)
	}
	return nil
}

// Remove destroys the sandbox once its plan and guest nonce agree, then drops its marker. A
// sandbox Docker no longer has loses its marker without a nonce check (there is nothing left
// to prove, and nothing to destroy).
func (m *Manager) Remove(ctx context.Context, owner OwnerKey, name string) (removed bool, err error) {
	sb, err := m.find(ctx, name)
	if err != nil {
		return false, fmt.Errorf("remove sandbox %s: %w", name, err)
	}
	if sb == nil {
		if m.Network != nil {
			if err := m.Network.Release(ctx, name, true); err != nil {
				return false, fmt.Errorf("remove sandbox %s: %w", name, err)
			}
		}
		return false, m.Markers.Remove(name)
	}
	if _, err := m.owned(ctx, owner, name); err != nil {
		return false, err
	}
	if m.Network != nil {
		if err := m.Network.Release(ctx, name, false); err != nil {
			return false, fmt.Errorf("remove sandbox %s: %w", name, err)
		}
	}
	if err := m.Driver.Remove(ctx, name); err != nil {
		return false, fmt.Errorf("remove sandbox %s: %w", name, err)
	}
	return true, m.Markers.Remove(name)
}

// InventoryEntry is one Jam sandbox or marker and what the inventory concludes about it.
type InventoryEntry struct {
	Name        string                    `json:"name"`
	Disposition domain.SandboxDisposition `json:"disposition"`
	// Status is Docker's status; "" when Docker has no such sandbox.
	Status domain.SandboxStatus `json:"status,omitempty"`
	// Owner is the marker's owner; nil without a marker.
	Owner *OwnerKey `json:"owner,omitempty"`
	// Host is the runtime host that names this sandbox, when one does.
	Host   string `json:"host,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Inventory is the node's sandboxes as Jam sees them. Foreign sandboxes (no marker, named by
// no runtime host) are counted, never listed.
type Inventory struct {
	Entries []InventoryEntry `json:"entries"`
	Foreign int              `json:"foreign"`
}

// HostRef is what the inventory needs of a runtime host.
type HostRef struct {
	ID, Name string
	Owner    OwnerKey
}

// Inventory classifies every sandbox Docker lists and every marker on disk against the
// runtime hosts that name sandboxes (hosts: sandbox name -> host). It reads only: no guest is
// exec'd (exec would start a stopped sandbox), so Healthy means marker and host agree.
func (m *Manager) Inventory(ctx context.Context, hosts map[string]HostRef) (Inventory, error) {
	list, err := m.Driver.List(ctx)
	if err != nil {
		return Inventory{}, fmt.Errorf("sandbox inventory: %w", err)
	}
	markers, err := m.Markers.Names()
	if err != nil {
		return Inventory{}, err
	}
	inv := Inventory{Entries: []InventoryEntry{}}
	seen := map[string]bool{}
	for _, sb := range list {
		seen[sb.Name] = true
		h, named := hosts[sb.Name]
		e := InventoryEntry{Name: sb.Name, Status: sb.Status, Host: h.ID}
		switch {
		case !slices.Contains(markers, sb.Name) && !named:
			inv.Foreign++
			continue
		case !slices.Contains(markers, sb.Name):
			e.Disposition = domain.DispositionPersistedWithoutOwnerMarker
		default:
			m.classifyMarker(&e, h, named)
		}
		inv.Entries = append(inv.Entries, e)
	}
	for _, name := range markers {
		if seen[name] {
			continue
		}
		h, named := hosts[name]
		e := InventoryEntry{Name: name, Host: h.ID, Disposition: domain.DispositionOrphanOwnerMarker}
		if named {
			e.Disposition = domain.DispositionOwnerWithoutDocker
		}
		if mk, err := m.Markers.Read(name); err == nil {
			e.Owner = &mk.Plan.Owner
		}
		inv.Entries = append(inv.Entries, e)
	}
	return inv, nil
}

func (m *Manager) classifyMarker(e *InventoryEntry, h HostRef, named bool) {
	mk, err := m.Markers.Read(e.Name)
	if err != nil {
		e.Disposition, e.Detail = domain.DispositionOwnershipMismatch, "owner marker unreadable"
		return
	}
	e.Owner = &mk.Plan.Owner
	switch {
	case !named:
		e.Disposition, e.Detail = domain.DispositionOwnershipMismatch, "no runtime host names this sandbox"
	case mk.Plan.Name != e.Name || mk.Plan.Owner.AgentID != h.Owner.AgentID || mk.Plan.Owner.ID != h.Owner.ID:
		e.Disposition, e.Detail = domain.DispositionOwnershipMismatch, "the marker's owner is not the runtime host that names it"
	case mk.Pending:
		e.Disposition, e.Detail = domain.DispositionOwnershipMismatch, "created, but the owner marker was never published"
	case mk.Plan.Owner.Kind == OwnerRuntimeSession:
		e.Disposition = domain.DispositionDedicatedCompatibility
	default:
		e.Disposition = domain.DispositionHealthy
	}
}

// Names lists the sandbox names that have host markers.
func (m Markers) Names() ([]string, error) {
	entries, err := os.ReadDir(m.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("owner markers: %w", err)
	}
	var out []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if ok && !e.IsDir() && ValidateName(name) == nil {
			out = append(out, name)
		}
	}
	return out, nil
}
