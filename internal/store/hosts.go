package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

type hostRow struct {
	ID            uuid.UUID `db:"id"`
	AgentID       uuid.UUID `db:"agent_id"`
	TemplateID    uuid.UUID `db:"template_id"`
	Placement     string    `db:"placement"`
	State         string    `db:"state"`
	Node          string    `db:"node"`
	Sandboxed     bool      `db:"sandboxed"`
	SandboxName   *string   `db:"sandbox_name"`
	Compatibility string    `db:"compatibility"`
	CreatedAt     time.Time `db:"created_at"`
	UpdatedAt     time.Time `db:"updated_at"`
}

func (r hostRow) domain() domain.RuntimeHost {
	h := domain.RuntimeHost{ID: r.ID, AgentID: r.AgentID, TemplateID: r.TemplateID, Placement: domain.Placement(r.Placement),
		State: domain.RuntimeHostState(r.State), Node: r.Node, Sandboxed: r.Sandboxed, Compatibility: r.Compatibility,
		CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt)}
	if r.SandboxName != nil {
		h.SandboxName = *r.SandboxName
	}
	return h
}

// GetRuntimeHost reads one runtime host.
func (q *Q) GetRuntimeHost(ctx context.Context, id uuid.UUID) (domain.RuntimeHost, error) {
	var r hostRow
	if err := q.get(ctx, &r, `SELECT * FROM runtime_hosts WHERE id = ?`, id); err != nil {
		return domain.RuntimeHost{}, fmt.Errorf("runtime host %s: %w", id, err)
	}
	return r.domain(), nil
}

// AllocateRequest asks for the runtime host of one runtime session.
type AllocateRequest struct {
	AgentID, TemplateID, RuntimeSession uuid.UUID
	Placement                           domain.Placement
	Node                                string
	Sandboxed                           bool
	// Compatibility is the session's domain.CompatibilityFingerprint.
	Compatibility string
	// SandboxName derives a new host's sandbox name from its id (sandboxed hosts only).
	SandboxName func(host uuid.UUID) string
	At          time.Time
}

// Allocation is the host a session runs on.
type Allocation struct {
	Host domain.RuntimeHost
	// Created: this call inserted the host; Joined: it added the session's membership.
	Created, Joined bool
}

// ErrIncompatibleHost: the session's existing or designated host does not match what it
// asks for. Nothing was written; no second owner exists.
var ErrIncompatibleHost = fmt.Errorf("%w: the runtime host is not compatible with the session", ErrConflict)

// allocateAttempts bounds retries after losing the one-live-Shared-host race.
const allocateAttempts = 3

// AllocateHost finds or makes a session's runtime host, in this order: a membership that
// exists is reused after a compatibility check (so a retry after a crash converges on the same
// record); a Dedicated host's id is the session's own UUID; a Shared session joins the agent's
// live Shared host when compatible, or inserts one, and on losing the unique-index race to a
// concurrent allocation, reloads the winner and converges.
func (s *Store) AllocateHost(ctx context.Context, r AllocateRequest) (Allocation, error) {
	r.At = domain.Timestamp(r.At)
	for attempt := 1; ; attempt++ {
		var out Allocation
		err := s.Q.atomic(ctx, func(q *Q) error {
			var err error
			out, err = q.allocate(ctx, r)
			return err
		})
		if errors.Is(err, ErrConflict) && !errors.Is(err, ErrIncompatibleHost) && attempt < allocateAttempts {
			continue
		}
		if err != nil {
			return Allocation{}, fmt.Errorf("allocate runtime host of %s: %w", r.RuntimeSession, err)
		}
		return out, nil
	}
}

func (q *Q) allocate(ctx context.Context, r AllocateRequest) (Allocation, error) {
	var member struct {
		Host uuid.UUID `db:"runtime_host_id"`
	}
	err := q.get(ctx, &member, `SELECT runtime_host_id FROM runtime_host_sessions WHERE runtime_session_id = ?`, r.RuntimeSession)
	switch {
	case err == nil:
		h, err := q.GetRuntimeHost(ctx, member.Host)
		if err != nil {
			return Allocation{}, err
		}
		return Allocation{Host: h}, compatible(h, r)
	case !errors.Is(err, ErrNotFound):
		return Allocation{}, err
	}

	var out Allocation
	switch r.Placement {
	case domain.PlacementDedicated:
		h, err := q.GetRuntimeHost(ctx, r.RuntimeSession)
		if errors.Is(err, ErrNotFound) {
			h, err = q.insertHost(ctx, r.RuntimeSession, r)
			out.Created = err == nil
		}
		if err != nil {
			return Allocation{}, err
		}
		out.Host = h
	case domain.PlacementShared:
		h, err := q.liveSharedHost(ctx, r.AgentID)
		switch {
		case err == nil:
			out.Host = h
		case errors.Is(err, ErrNotFound):
			// Losing the one-live-Shared-host race surfaces as ErrConflict; the caller retries
			// and finds the winner here.
			if out.Host, err = q.insertHost(ctx, uuid.New(), r); err != nil {
				return Allocation{}, err
			}
			out.Created = true
		default:
			return Allocation{}, err
		}
	default:
		return Allocation{}, &domain.ValidationError{Field: "placement", Detail: fmt.Sprintf("unknown placement %q", r.Placement)}
	}
	if err := compatible(out.Host, r); err != nil {
		return Allocation{}, err
	}
	if _, err := q.exec(ctx, `
INSERT INTO runtime_host_sessions (runtime_session_id, runtime_host_id, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		r.RuntimeSession, out.Host.ID, domain.MembershipDormant, r.At, r.At); err != nil {
		return Allocation{}, err
	}
	out.Joined = true
	return out, nil
}

func (q *Q) insertHost(ctx context.Context, id uuid.UUID, r AllocateRequest) (domain.RuntimeHost, error) {
	var name *string
	if r.Sandboxed && r.SandboxName != nil {
		n := r.SandboxName(id)
		name = &n
	}
	if _, err := q.exec(ctx, `
INSERT INTO runtime_hosts (id, agent_id, template_id, placement, state, node, sandboxed, sandbox_name, compatibility, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, r.AgentID, r.TemplateID, r.Placement, domain.HostProvisioning, r.Node,
		r.Sandboxed, name, r.Compatibility, r.At, r.At); err != nil {
		return domain.RuntimeHost{}, err
	}
	return q.GetRuntimeHost(ctx, id)
}

// compatible refuses a host that another agent, template, placement or fingerprint owns, or
// that is archived or removed.
func compatible(h domain.RuntimeHost, r AllocateRequest) error {
	switch {
	case h.AgentID != r.AgentID:
		return fmt.Errorf("%w: host %s belongs to another agent", ErrIncompatibleHost, h.ID)
	case h.TemplateID != r.TemplateID:
		return fmt.Errorf("%w: host %s runs another template", ErrIncompatibleHost, h.ID)
	case h.Placement != r.Placement:
		return fmt.Errorf("%w: host %s is %s", ErrIncompatibleHost, h.ID, h.Placement)
	case h.Compatibility != r.Compatibility:
		return fmt.Errorf("%w: host %s has other host-wide inputs", ErrIncompatibleHost, h.ID)
	case h.State == domain.HostArchived || h.State == domain.HostRemoved:
		return fmt.Errorf("%w: host %s is %s", ErrIncompatibleHost, h.ID, h.State)
	case h.Sandboxed != r.Sandboxed:
		return fmt.Errorf("%w: host %s differs in sandboxing", ErrIncompatibleHost, h.ID)
	}
	return nil
}

// liveSharedHost is the agent's one Shared host that is neither archived nor removed.
func (q *Q) liveSharedHost(ctx context.Context, agent uuid.UUID) (domain.RuntimeHost, error) {
	var row hostRow
	if err := q.get(ctx, &row, `SELECT * FROM runtime_hosts WHERE agent_id = ? AND placement = ? AND state NOT IN (?, ?)`,
		agent, domain.PlacementShared, domain.HostArchived, domain.HostRemoved); err != nil {
		return domain.RuntimeHost{}, err
	}
	return row.domain(), nil
}

// HostFor is the runtime host a session would run on if it acquired one now (r as
// AllocateHost would get it), found without writing: the host it is a member of, else its
// own Dedicated host, else its agent's live Shared host. ErrNotFound: it would get a new one;
// ErrIncompatibleHost (with the host): AllocateHost would refuse that host.
func (q *Q) HostFor(ctx context.Context, r AllocateRequest) (domain.RuntimeHost, error) {
	h, err := q.HostOfSession(ctx, r.RuntimeSession)
	switch {
	case err == nil:
		return h, compatible(h, r)
	case !errors.Is(err, ErrNotFound):
		return h, err
	}
	switch r.Placement {
	case domain.PlacementDedicated:
		h, err = q.GetRuntimeHost(ctx, r.RuntimeSession)
	case domain.PlacementShared:
		h, err = q.liveSharedHost(ctx, r.AgentID)
	default:
		return domain.RuntimeHost{}, fmt.Errorf("runtime host of %s: %w", r.RuntimeSession, ErrNotFound)
	}
	if err != nil {
		return h, err
	}
	return h, compatible(h, r)
}
