package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// ListRuntimeHosts lists runtime hosts, oldest first; agent narrows to one agent's.
func (q *Q) ListRuntimeHosts(ctx context.Context, agent *uuid.UUID) ([]domain.RuntimeHost, error) {
	query, args := `SELECT * FROM runtime_hosts`, []any{}
	if agent != nil {
		query, args = query+` WHERE agent_id = ?`, append(args, *agent)
	}
	var rows []hostRow
	if err := q.selectAll(ctx, &rows, query+` ORDER BY created_at, id`, args...); err != nil {
		return nil, fmt.Errorf("list runtime hosts: %w", err)
	}
	out := make([]domain.RuntimeHost, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// HostMember is one durable membership of a runtime host with the host session it names.
type HostMember struct {
	RuntimeSession uuid.UUID              `db:"runtime_session_id"`
	State          domain.MembershipState `db:"state"`
	AgentID        uuid.UUID              `db:"agent_id"`
	RoomID         uuid.UUID              `db:"room_id"`
	Alias          string                 `db:"alias"`
	// Removed: the session's room binding is a tombstone (a dormant, inactive member).
	Removed bool `db:"removed"`
	// Placement is the session's current configured placement (it may differ from the host's
	// after a template edit).
	Placement domain.Placement `db:"-"`
	// Workspace is the session's configured workspace source.
	Workspace domain.WorkspaceSource `db:"-"`
}

// HostMembers lists the memberships of a host from the durable table, in join order. A
// membership whose session row is gone is still listed (AgentID nil) so callers can refuse
// to act on a scope they cannot resolve.
func (q *Q) HostMembers(ctx context.Context, host uuid.UUID) ([]HostMember, error) {
	var rows []struct {
		RuntimeSession uuid.UUID  `db:"runtime_session_id"`
		State          string     `db:"state"`
		AgentID        *uuid.UUID `db:"agent_id"`
		RoomID         *uuid.UUID `db:"room_id"`
		Alias          *string    `db:"alias"`
		RemovedAt      *time.Time `db:"removed_at"`
		Config         *string    `db:"config"`
	}
	if err := q.selectAll(ctx, &rows, `
SELECT m.runtime_session_id, m.state, h.agent_id, h.room_id, h.alias, h.removed_at, h.config
FROM runtime_host_sessions m LEFT JOIN host_sessions h ON h.runtime_session_id = m.runtime_session_id
WHERE m.runtime_host_id = ? ORDER BY m.created_at, m.runtime_session_id`, host); err != nil {
		return nil, fmt.Errorf("members of runtime host %s: %w", host, err)
	}
	out := make([]HostMember, len(rows))
	for i, r := range rows {
		m := HostMember{RuntimeSession: r.RuntimeSession, State: domain.MembershipState(r.State)}
		if r.AgentID != nil {
			m.AgentID, m.RoomID, m.Alias, m.Removed = *r.AgentID, *r.RoomID, *r.Alias, r.RemovedAt != nil
			var c domain.TemplateConfig
			if err := json.Unmarshal([]byte(*r.Config), &c); err != nil {
				return nil, fmt.Errorf("member %s of runtime host %s: stored configuration: %w", r.RuntimeSession, host, err)
			}
			m.Placement, m.Workspace = domain.ResolvePlacement(c.Placement), c.Sandbox.WorkspaceSource
		}
		out[i] = m
	}
	return out, nil
}

// SetMembershipState records whether a session is running on its host. A session without a
// membership (host-native) is ErrNotFound.
func (q *Q) SetMembershipState(ctx context.Context, session uuid.UUID, state domain.MembershipState, at time.Time) error {
	res, err := q.exec(ctx, `UPDATE runtime_host_sessions SET state = ?, updated_at = ? WHERE runtime_session_id = ?`,
		state, domain.Timestamp(at), session)
	if err != nil {
		return fmt.Errorf("membership of %s: %w", session, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("membership of %s: %w", session, ErrNotFound)
	}
	return nil
}

// SetHostState moves a live host between provisioning, active and parked. Archived and
// removed hosts are final here (cleanup owns them): such a host is ErrConflict.
func (q *Q) SetHostState(ctx context.Context, host uuid.UUID, state domain.RuntimeHostState, at time.Time) error {
	if state == domain.HostArchived || state == domain.HostRemoved {
		return &domain.ValidationError{Field: "state", Detail: fmt.Sprintf("%s is set by cleanup, not by the host's lifecycle", state)}
	}
	res, err := q.exec(ctx, `UPDATE runtime_hosts SET state = ?, updated_at = ? WHERE id = ? AND state NOT IN (?, ?)`,
		state, domain.Timestamp(at), host, domain.HostArchived, domain.HostRemoved)
	if err != nil {
		return fmt.Errorf("state of runtime host %s: %w", host, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := q.GetRuntimeHost(ctx, host); err != nil {
			return err
		}
		return fmt.Errorf("runtime host %s is archived or removed: %w", host, ErrConflict)
	}
	return nil
}

// MarkHostRemoved records a whole-host cleanup's end: a parked or archived host becomes
// removed (a removed host stays removed).
func (q *Q) MarkHostRemoved(ctx context.Context, host uuid.UUID, at time.Time) error {
	return q.moveHost(ctx, host, domain.HostRemoved, at, domain.HostParked, domain.HostArchived, domain.HostRemoved)
}

// RetireHostForCleanup takes a parked host out of service as its cleanup is prepared: an
// archived host starts nothing and is allocated to no one. An archived host stays archived.
func (q *Q) RetireHostForCleanup(ctx context.Context, host uuid.UUID, at time.Time) error {
	return q.moveHost(ctx, host, domain.HostArchived, at, domain.HostParked, domain.HostArchived)
}

// ReviveHost returns an archived or removed host to parked: a restore put a workspace back
// on it. A live host is left as it is.
func (q *Q) ReviveHost(ctx context.Context, host uuid.UUID, at time.Time) error {
	h, err := q.GetRuntimeHost(ctx, host)
	if err != nil {
		return err
	}
	if h.State != domain.HostArchived && h.State != domain.HostRemoved {
		return nil
	}
	return q.moveHost(ctx, host, domain.HostParked, at, domain.HostArchived, domain.HostRemoved)
}

func (q *Q) moveHost(ctx context.Context, host uuid.UUID, to domain.RuntimeHostState, at time.Time, from ...domain.RuntimeHostState) error {
	var h hostRow
	if err := q.get(ctx, &h, `SELECT * FROM runtime_hosts WHERE id = ?`, host); err != nil {
		return fmt.Errorf("runtime host %s: %w", host, err)
	}
	if !slices.Contains(from, domain.RuntimeHostState(h.State)) {
		return fmt.Errorf("runtime host %s is %s, not %v: %w", host, h.State, from, ErrConflict)
	}
	if _, err := q.exec(ctx, `UPDATE runtime_hosts SET state = ?, updated_at = ? WHERE id = ?`, to, domain.Timestamp(at), host); err != nil {
		return fmt.Errorf("state of runtime host %s: %w", host, err)
	}
	return nil
}

// HostOfSession is the runtime host a session is a member of; ErrNotFound for a host-native
// session (no membership).
func (q *Q) HostOfSession(ctx context.Context, session uuid.UUID) (domain.RuntimeHost, error) {
	var r hostRow
	if err := q.get(ctx, &r, `
SELECT h.* FROM runtime_hosts h JOIN runtime_host_sessions m ON m.runtime_host_id = h.id
WHERE m.runtime_session_id = ?`, session); err != nil {
		return domain.RuntimeHost{}, fmt.Errorf("runtime host of %s: %w", session, err)
	}
	return r.domain(), nil
}

// RecordManagedWorkspace records the state of a session's managed workspace after
// provisioning. Its id is the runtime session's (one workspace per session); the host,
// source and path are fixed at first record. An archived workspace keeps its state (only an
// explicit SetWorkspaceState, as a restore makes, brings it back).
func (q *Q) RecordManagedWorkspace(ctx context.Context, host, session uuid.UUID, source domain.WorkspaceSource,
	hostPath string, state domain.WorkspaceState, at time.Time) error {
	var path *string
	if hostPath != "" {
		path = &hostPath
	}
	at = domain.Timestamp(at)
	if _, err := q.exec(ctx, `
INSERT INTO managed_workspaces (id, runtime_host_id, runtime_session_id, source, host_path, state, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at
WHERE managed_workspaces.state <> 'archived'`,
		session, host, session, source, path, state, at, at); err != nil {
		return fmt.Errorf("managed workspace of %s: %w", session, err)
	}
	return nil
}

// HostsOnNode lists the runtime hosts pinned to node that are not archived or removed.
func (q *Q) HostsOnNode(ctx context.Context, node string) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	if err := q.selectAll(ctx, &ids, `SELECT id FROM runtime_hosts WHERE node = ? AND state NOT IN (?, ?) ORDER BY id`,
		node, domain.HostArchived, domain.HostRemoved); err != nil {
		return nil, fmt.Errorf("hosts on %s: %w", node, err)
	}
	return ids, nil
}
