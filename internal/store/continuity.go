package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// ErrResetExists: the source host already has a continuity reset with another id.
var ErrResetExists = fmt.Errorf("%w: the runtime host already has a continuity reset", ErrConflict)

// PrepareContinuityReset persists the immutable reset record of a runtime host before
// anything changes: every membership with its room binding, each mapped to a newly minted
// replacement session and binding. A retry finds the record already written and returns it
// (one reset per source host); the first writer's mapping is the only one.
func (s *Store) PrepareContinuityReset(ctx context.Context, id, host uuid.UUID, evidence string, at time.Time) (domain.ContinuityReset, error) {
	var out domain.ContinuityReset
	err := s.Q.atomic(ctx, func(q *Q) error {
		prev, err := q.GetContinuityReset(ctx, host)
		switch {
		case err == nil:
			if prev.ID != id {
				return ErrResetExists
			}
			out = prev
			return nil
		case !errors.Is(err, ErrNotFound):
			return err
		}
		var rows []struct {
			Session uuid.UUID `db:"runtime_session_id"`
			Binding uuid.UUID `db:"id"`
			Agent   uuid.UUID `db:"agent_id"`
			Room    uuid.UUID `db:"room_id"`
			Active  bool      `db:"active"`
		}
		if err := q.selectAll(ctx, &rows, `
SELECT m.runtime_session_id, b.id, b.agent_id, b.room_id, b.active
FROM runtime_host_sessions m JOIN room_bindings b ON b.runtime_session_id = m.runtime_session_id
WHERE m.runtime_host_id = ? ORDER BY m.created_at, m.runtime_session_id`, host); err != nil {
			return err
		}
		out = domain.ContinuityReset{ID: id, SourceHost: host, EvidenceChecksum: evidence, CreatedAt: domain.Timestamp(at),
			Mapping: make([]domain.ContinuityMapping, len(rows))}
		for i, r := range rows {
			out.Mapping[i] = domain.ContinuityMapping{SourceSession: r.Session, SourceBinding: r.Binding, AgentID: r.Agent,
				RoomID: r.Room, Active: r.Active, ReplacementSession: uuid.New(), ReplacementBinding: uuid.New()}
		}
		mapping, err := json.Marshal(out.Mapping)
		if err != nil {
			return err
		}
		_, err = q.exec(ctx, `
INSERT INTO continuity_resets (id, source_runtime_host_id, evidence_checksum, mapping, created_at) VALUES (?, ?, ?, ?, ?)`,
			id, host, evidence, string(mapping), out.CreatedAt)
		return err
	})
	if err != nil {
		return domain.ContinuityReset{}, fmt.Errorf("continuity reset of %s: %w", host, err)
	}
	return out, nil
}

// GetContinuityReset reads the reset record of a source host.
func (q *Q) GetContinuityReset(ctx context.Context, host uuid.UUID) (domain.ContinuityReset, error) {
	var r struct {
		ID        uuid.UUID `db:"id"`
		Host      uuid.UUID `db:"source_runtime_host_id"`
		Evidence  string    `db:"evidence_checksum"`
		Mapping   string    `db:"mapping"`
		CreatedAt time.Time `db:"created_at"`
	}
	if err := q.get(ctx, &r, `SELECT * FROM continuity_resets WHERE source_runtime_host_id = ?`, host); err != nil {
		return domain.ContinuityReset{}, fmt.Errorf("continuity reset of %s: %w", host, err)
	}
	out := domain.ContinuityReset{ID: r.ID, SourceHost: r.Host, EvidenceChecksum: r.Evidence, CreatedAt: utc(r.CreatedAt)}
	if err := json.Unmarshal([]byte(r.Mapping), &out.Mapping); err != nil {
		return domain.ContinuityReset{}, fmt.Errorf("continuity reset of %s: stored mapping: %w", host, err)
	}
	return out, nil
}

// ApplyContinuityReset carries a persisted reset out in one transaction, idempotently: each
// source session's room moves to its replacement (a new runtime session with the same
// configuration and no provider identity, a new binding; the source binding becomes a
// tombstone and its host session removed), source memberships go dormant, source workspaces
// are archived, and — the final write — the source host is archived. Nothing is deleted.
func (s *Store) ApplyContinuityReset(ctx context.Context, r domain.ContinuityReset, at time.Time) error {
	at = domain.Timestamp(at)
	err := s.Q.atomic(ctx, func(q *Q) error {
		h, err := q.GetRuntimeHost(ctx, r.SourceHost)
		if err != nil {
			return err
		}
		if h.State == domain.HostArchived {
			return nil // the final write happened: the reset is complete
		}
		for _, m := range r.Mapping {
			if err := q.replaceSession(ctx, m, at); err != nil {
				return err
			}
		}
		if _, err := q.exec(ctx, `UPDATE runtime_host_sessions SET state = ?, updated_at = ? WHERE runtime_host_id = ?`,
			domain.MembershipDormant, at, r.SourceHost); err != nil {
			return err
		}
		if _, err := q.exec(ctx, `UPDATE managed_workspaces SET state = ?, updated_at = ? WHERE runtime_host_id = ?`,
			domain.WorkspaceArchived, at, r.SourceHost); err != nil {
			return err
		}
		_, err = q.exec(ctx, `UPDATE runtime_hosts SET state = ?, updated_at = ? WHERE id = ?`, domain.HostArchived, at, r.SourceHost)
		return err
	})
	if err != nil {
		return fmt.Errorf("apply continuity reset %s: %w", r.ID, err)
	}
	return nil
}

func (q *Q) replaceSession(ctx context.Context, m domain.ContinuityMapping, at time.Time) error {
	var n int
	if err := q.get(ctx, &n, `SELECT COUNT(*) FROM runtime_sessions WHERE id = ?`, m.ReplacementSession); err != nil {
		return err
	}
	if n > 0 {
		return nil // replaced already
	}
	src, err := q.GetHostSession(ctx, m.SourceSession)
	if err != nil {
		return err
	}
	// The binding as it is now, not as the record saw it: a room left since stays left.
	var active bool
	if err := q.get(ctx, &active, `SELECT active FROM room_bindings WHERE id = ?`, m.SourceBinding); err != nil {
		return err
	}
	m.Active = active
	if active { // a tombstone stays untouched, so a re-add finds the replacement, not it
		if _, err := q.exec(ctx, `UPDATE room_bindings SET active = ?, generation = generation + 1, updated_at = ? WHERE id = ?`,
			false, at, m.SourceBinding); err != nil {
			return err
		}
	}
	if _, err := q.exec(ctx, `UPDATE host_sessions SET removed_at = ?, updated_at = ? WHERE runtime_session_id = ? AND removed_at IS NULL`,
		at, at, m.SourceSession); err != nil {
		return err
	}
	cfg, err := encodeConfig(src.Config)
	if err != nil {
		return err
	}
	if _, err := q.exec(ctx, `
INSERT INTO runtime_sessions (id, agent_id, template_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		m.ReplacementSession, src.AgentID, src.TemplateID, at, at); err != nil {
		return err
	}
	var removed *time.Time
	if !m.Active {
		removed = &at
	}
	if _, err := q.exec(ctx, `
INSERT INTO host_sessions (runtime_session_id, agent_id, template_id, alias, room_id, config, desired_generation,
    effective_generation, removed_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.ReplacementSession, src.AgentID, src.TemplateID, src.Alias, src.RoomID, cfg, src.DesiredGeneration,
		src.EffectiveGeneration, removed, at, at); err != nil {
		return err
	}
	_, err = q.exec(ctx, `
INSERT INTO room_bindings (id, agent_id, room_id, runtime_session_id, active, generation, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, 1, ?, ?)`, m.ReplacementBinding, m.AgentID, m.RoomID, m.ReplacementSession, m.Active, at, at)
	return err
}
