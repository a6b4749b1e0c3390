package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

type bindingRow struct {
	ID               uuid.UUID `db:"id"`
	AgentID          uuid.UUID `db:"agent_id"`
	RoomID           uuid.UUID `db:"room_id"`
	RuntimeSessionID uuid.UUID `db:"runtime_session_id"`
	Active           bool      `db:"active"`
	Generation       int64     `db:"generation"`
	CreatedAt        time.Time `db:"created_at"`
	UpdatedAt        time.Time `db:"updated_at"`
}

func (r bindingRow) domain() domain.Binding {
	return domain.Binding{ID: r.ID, AgentID: r.AgentID, RoomID: r.RoomID, RuntimeSessionID: r.RuntimeSessionID,
		Active: r.Active, Generation: r.Generation, CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt)}
}

type hostSessionRow struct {
	RuntimeSessionID    uuid.UUID  `db:"runtime_session_id"`
	AgentID             uuid.UUID  `db:"agent_id"`
	TemplateID          uuid.UUID  `db:"template_id"`
	Alias               string     `db:"alias"`
	RoomID              uuid.UUID  `db:"room_id"`
	Config              string     `db:"config"`
	DesiredGeneration   int64      `db:"desired_generation"`
	EffectiveGeneration int64      `db:"effective_generation"`
	PendingChange       *string    `db:"pending_change"`
	ProviderSessionID   *string    `db:"provider_session_id"`
	ProviderVersion     *string    `db:"provider_version"`
	ProviderSessionKind *string    `db:"provider_session_kind"`
	FailureClass        *string    `db:"failure_class"`
	FailureReason       *string    `db:"failure_reason"`
	FailedAt            *time.Time `db:"failed_at"`
	Recycles            int        `db:"recycles"`
	LastRecycle         *string    `db:"last_recycle"`
	RemovedAt           *time.Time `db:"removed_at"`
	CreatedAt           time.Time  `db:"created_at"`
	UpdatedAt           time.Time  `db:"updated_at"`
}

func (r hostSessionRow) domain() (domain.HostSession, error) {
	hs := domain.HostSession{
		RuntimeSessionID: r.RuntimeSessionID, AgentID: r.AgentID, TemplateID: r.TemplateID, Alias: r.Alias,
		RoomID: r.RoomID, DesiredGeneration: r.DesiredGeneration, EffectiveGeneration: r.EffectiveGeneration,
		Removed: r.RemovedAt != nil, CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt),
	}
	if err := json.Unmarshal([]byte(r.Config), &hs.Config); err != nil {
		return hs, fmt.Errorf("host session %s: stored configuration: %w", r.RuntimeSessionID, err)
	}
	if r.PendingChange != nil {
		hs.PendingChange = &domain.PendingChange{}
		if err := json.Unmarshal([]byte(*r.PendingChange), hs.PendingChange); err != nil {
			return hs, fmt.Errorf("host session %s: pending change: %w", r.RuntimeSessionID, err)
		}
	}
	if r.ProviderSessionID != nil {
		hs.ProviderSessionID = *r.ProviderSessionID
	}
	if r.ProviderVersion != nil {
		hs.ProviderVersion = *r.ProviderVersion
	}
	if r.ProviderSessionKind != nil {
		hs.ProviderSessionKind = *r.ProviderSessionKind
	}
	if r.FailureClass != nil {
		f := &domain.RuntimeFailure{Class: domain.FailureClass(*r.FailureClass)}
		if r.FailureReason != nil {
			f.Reason = *r.FailureReason
		}
		if r.FailedAt != nil {
			f.At = utc(*r.FailedAt)
		}
		hs.Failure = f
	}
	hs.Recycles = r.Recycles
	if r.LastRecycle != nil {
		hs.LastRecycle = &domain.Recycle{}
		if err := json.Unmarshal([]byte(*r.LastRecycle), hs.LastRecycle); err != nil {
			return hs, fmt.Errorf("host session %s: last recycle: %w", r.RuntimeSessionID, err)
		}
	}
	return hs, nil
}

const hostSessionSelect = `
SELECT h.runtime_session_id, h.agent_id, h.template_id, h.alias, h.room_id, h.config, h.desired_generation,
       h.effective_generation, h.pending_change, s.provider_session_id, s.provider_version, s.provider_session_kind, s.failure_class,
       s.failure_reason, s.failed_at, s.recycles, s.last_recycle, h.removed_at, h.created_at, h.updated_at
FROM host_sessions h JOIN runtime_sessions s ON s.id = h.runtime_session_id`

// sessionBoundEvent is the payload of session_bound.
type sessionBoundEvent struct {
	RuntimeSessionID uuid.UUID `json:"runtime_session_id"`
	BindingID        uuid.UUID `json:"binding_id"`
	TemplateID       uuid.UUID `json:"template_id"`
	Alias            string    `json:"alias"`
	Reused           bool      `json:"reused"`
}

// bindRoom binds an owned agent's new room membership, inside the caller's transaction.
// An active binding is kept as it is; a tombstone is reactivated with its exact runtime
// session; otherwise a host session is materialized from the template pick names (the
// agent's first when pick is zero). A re-add keeps its session's template: a pick naming
// another one is refused, since reusing the session is what keeps the room's thread.
func (q *Q) bindRoom(ctx context.Context, a domain.Agent, room uuid.UUID, pick TemplatePick, at time.Time, m *Membership) error {
	var b bindingRow
	err := q.get(ctx, &b, `
SELECT * FROM room_bindings WHERE agent_id = ? AND room_id = ? ORDER BY active DESC, updated_at DESC, created_at DESC LIMIT 1`, a.ID, room)
	switch {
	case err == nil && b.Active:
		return q.fillMembership(ctx, b.domain(), false, m)
	case err == nil && !pick.zero():
		hs, err := q.GetHostSession(ctx, b.RuntimeSessionID)
		if err != nil {
			return err
		}
		t, err := q.pickTemplate(ctx, a, pick)
		if err != nil {
			return err
		}
		if t.ID != hs.TemplateID {
			return domain.Refuse("agent %s was in this room before with template %q, and adding it back reuses that runtime session (its thread); add it without a template, then change that template (jam template save --apply-mode apply_and_restart)",
				a.Name, hs.Config.Alias)
		}
		fallthrough
	case err == nil:
		// Authoritative re-add: the same runtime session, hence the same provider thread.
		if _, err := q.exec(ctx, `UPDATE room_bindings SET active = ?, generation = generation + 1, updated_at = ? WHERE id = ?`,
			true, at, b.ID); err != nil {
			return err
		}
		if _, err := q.exec(ctx, `UPDATE host_sessions SET removed_at = NULL, updated_at = ? WHERE runtime_session_id = ?`,
			at, b.RuntimeSessionID); err != nil {
			return err
		}
		b.Active, b.Generation, b.UpdatedAt = true, b.Generation+1, at
		return q.finishBind(ctx, b.domain(), true, at, m)
	case !errors.Is(err, ErrNotFound):
		return err
	}

	t, err := q.pickTemplate(ctx, a, pick)
	if err != nil {
		return err
	}
	session := uuid.New()
	cfg, err := encodeConfig(t.Config)
	if err != nil {
		return err
	}
	if _, err := q.exec(ctx, `
INSERT INTO runtime_sessions (id, agent_id, template_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		session, a.ID, t.ID, at, at); err != nil {
		return err
	}
	// A new room has no running configuration to preserve: it starts at the desired one.
	if _, err := q.exec(ctx, `
INSERT INTO host_sessions (runtime_session_id, agent_id, template_id, alias, room_id, config, desired_generation,
    effective_generation, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, session, a.ID, t.ID, domain.SessionAlias(t.Config.Alias, room), room, cfg,
		t.DesiredGeneration, t.DesiredGeneration, at, at); err != nil {
		if errors.Is(err, ErrConflict) {
			return domain.Refuse("room %s is already owned by another session of agent %s", room, a.Name)
		}
		return err
	}
	nb := domain.Binding{ID: uuid.New(), AgentID: a.ID, RoomID: room, RuntimeSessionID: session, Active: true,
		Generation: 1, CreatedAt: at, UpdatedAt: at}
	if _, err := q.exec(ctx, `
INSERT INTO room_bindings (id, agent_id, room_id, runtime_session_id, active, generation, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, nb.ID, a.ID, room, session, true, nb.Generation, at, at); err != nil {
		return err
	}
	m.Fresh = true
	return q.finishBind(ctx, nb, false, at, m)
}

// pickTemplate is the template pick names among the agent's, or its first.
func (q *Q) pickTemplate(ctx context.Context, a domain.Agent, pick TemplatePick) (domain.Template, error) {
	templates, err := q.ListTemplates(ctx, a.ID)
	if err != nil {
		return domain.Template{}, err
	}
	if len(templates) == 0 {
		return domain.Template{}, domain.Refuse("owned agent %s has no runtime template; create one before adding it to a room", a.Name)
	}
	if pick.zero() {
		return templates[0], nil
	}
	aliases := make([]string, len(templates))
	for i, t := range templates {
		if t.ID == pick.ID || (pick.Alias != "" && t.Config.Alias == pick.Alias) {
			return t, nil
		}
		aliases[i] = t.Config.Alias
	}
	want := pick.Alias
	if want == "" {
		want = pick.ID.String()
	}
	return domain.Template{}, domain.Refuse("agent %s has no template %s (its templates: %s)", a.Name, want, strings.Join(aliases, ", "))
}

func (q *Q) finishBind(ctx context.Context, b domain.Binding, reused bool, at time.Time, m *Membership) error {
	if err := q.fillMembership(ctx, b, reused, m); err != nil {
		return err
	}
	_, err := q.appendEvents(ctx, at, NewEvent(domain.EventSessionBound, &b.RoomID, &b.AgentID, sessionBoundEvent{
		RuntimeSessionID: b.RuntimeSessionID, BindingID: b.ID, TemplateID: m.Session.TemplateID,
		Alias: m.Session.Alias, Reused: reused,
	}))
	return err
}

func (q *Q) fillMembership(ctx context.Context, b domain.Binding, reused bool, m *Membership) error {
	hs, err := q.GetHostSession(ctx, b.RuntimeSessionID)
	if err != nil {
		return err
	}
	m.Binding, m.Session, m.Reused = &b, &hs, reused
	return nil
}

// unbindRoom turns an owned agent's active binding of a room into a tombstone.
func (q *Q) unbindRoom(ctx context.Context, agent, room uuid.UUID, at time.Time, m *Membership) error {
	var b bindingRow
	err := q.get(ctx, &b, `SELECT * FROM room_bindings WHERE agent_id = ? AND room_id = ? AND active`, agent, room)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := q.exec(ctx, `UPDATE room_bindings SET active = ?, generation = generation + 1, updated_at = ? WHERE id = ?`,
		false, at, b.ID); err != nil {
		return err
	}
	if _, err := q.exec(ctx, `UPDATE host_sessions SET removed_at = ?, updated_at = ? WHERE runtime_session_id = ?`,
		at, at, b.RuntimeSessionID); err != nil {
		return err
	}
	b.Active, b.Generation, b.UpdatedAt = false, b.Generation+1, at
	return q.fillMembership(ctx, b.domain(), false, m)
}

// GetHostSession reads one host session with its runtime session's provider binding.
func (q *Q) GetHostSession(ctx context.Context, runtimeSession uuid.UUID) (domain.HostSession, error) {
	var r hostSessionRow
	if err := q.get(ctx, &r, hostSessionSelect+` WHERE h.runtime_session_id = ?`, runtimeSession); err != nil {
		return domain.HostSession{}, fmt.Errorf("get host session %s: %w", runtimeSession, err)
	}
	return r.domain()
}

// SessionFilter narrows ListHostSessions; nil fields match everything.
type SessionFilter struct {
	Agent, Room *uuid.UUID
	// IncludeRemoved also lists sessions whose room membership ended.
	IncludeRemoved bool
}

// ListHostSessions lists host sessions, oldest first.
func (q *Q) ListHostSessions(ctx context.Context, f SessionFilter) ([]domain.HostSession, error) {
	query, args := hostSessionSelect+` WHERE 1 = 1`, []any{}
	if f.Agent != nil {
		query, args = query+` AND h.agent_id = ?`, append(args, *f.Agent)
	}
	if f.Room != nil {
		query, args = query+` AND h.room_id = ?`, append(args, *f.Room)
	}
	if !f.IncludeRemoved {
		query += ` AND h.removed_at IS NULL`
	}
	var rows []hostSessionRow
	if err := q.selectAll(ctx, &rows, query+` ORDER BY h.created_at, h.runtime_session_id`, args...); err != nil {
		return nil, fmt.Errorf("list host sessions: %w", err)
	}
	out := make([]domain.HostSession, len(rows))
	for i, r := range rows {
		hs, err := r.domain()
		if err != nil {
			return nil, err
		}
		out[i] = hs
	}
	return out, nil
}

// BindingOf returns the newest binding (active first) of an agent and room.
func (q *Q) BindingOf(ctx context.Context, agent, room uuid.UUID) (domain.Binding, error) {
	var b bindingRow
	if err := q.get(ctx, &b, `
SELECT * FROM room_bindings WHERE agent_id = ? AND room_id = ? ORDER BY active DESC, updated_at DESC LIMIT 1`, agent, room); err != nil {
		return domain.Binding{}, fmt.Errorf("binding of agent %s in room %s: %w", agent, room, err)
	}
	return b.domain(), nil
}

// BindProviderSession records the provider thread a runtime session is bound to.
func (q *Q) BindProviderSession(ctx context.Context, runtimeSession uuid.UUID, providerSession, kind string, at time.Time) error {
	// A bound identity is never replaced: exact resume would otherwise silently move to a
	// new thread. Only ReplaceProviderSession unbinds it (a fresh resume policy, or an
	// operator's start-fresh), saying so to the room; a host's start-fresh mints new runtime
	// sessions instead.
	// The kind is what a runtime of that kind bound; one that resumed a session bound before
	// kinds were recorded records it then.
	res, err := q.exec(ctx, `
UPDATE runtime_sessions SET provider_session_id = ?, provider_session_kind = COALESCE(?, provider_session_kind), updated_at = ?
WHERE id = ? AND (provider_session_id IS NULL OR provider_session_id = ?)`,
		providerSession, nullable(kind), domain.Timestamp(at), runtimeSession, providerSession)
	if err != nil {
		return fmt.Errorf("bind provider session of %s: %w", runtimeSession, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var n int
		if err := q.get(ctx, &n, `SELECT COUNT(*) FROM runtime_sessions WHERE id = ?`, runtimeSession); err != nil {
			return fmt.Errorf("bind provider session of %s: %w", runtimeSession, err)
		}
		if n == 0 {
			return fmt.Errorf("bind provider session of %s: %w", runtimeSession, ErrNotFound)
		}
		return fmt.Errorf("bind provider session of %s: %w: it is bound to another provider session", runtimeSession, ErrConflict)
	}
	return nil
}

// nullable is s, or NULL when it is empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// UnboundMemberships lists owned agents' active room memberships that have no active
// binding: the level-triggered half of binding, run at start so a crash between a
// membership and its binding, or a membership made while Jam was down, still binds.
func (q *Q) UnboundMemberships(ctx context.Context) ([]domain.Participant, error) {
	var rows []participantRow
	err := q.selectAll(ctx, &rows, `
SELECT p.* FROM room_participants p JOIN agents a ON a.id = p.agent_id
WHERE p.active AND p.kind = ? AND a.kind = ?
  AND NOT EXISTS (SELECT 1 FROM room_bindings b WHERE b.agent_id = p.agent_id AND b.room_id = p.room_id AND b.active)
ORDER BY p.created_at`, domain.ParticipantAgent, domain.AgentOwned)
	if err != nil {
		return nil, fmt.Errorf("unbound memberships: %w", err)
	}
	out := make([]domain.Participant, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// BindMembership binds an existing owned-agent membership that has no active binding.
func (q *Q) BindMembership(ctx context.Context, room, agent uuid.UUID, at time.Time) (Membership, error) {
	var m Membership
	at = domain.Timestamp(at)
	err := q.atomic(ctx, func(q *Q) error {
		a, err := q.GetAgent(ctx, agent)
		if err != nil {
			return err
		}
		m.Agent = a
		return q.bindRoom(ctx, a, room, TemplatePick{}, at, &m)
	})
	if err != nil {
		return Membership{}, fmt.Errorf("bind agent %s to room %s: %w", agent, room, err)
	}
	// The membership is older than its binding: messages may have been queued for it.
	m.Fresh = false
	return m, nil
}

// ReplaceProviderSession unbinds a runtime session's provider thread so its next start
// begins a new one, and tells the room (runtime_thread_replaced, naming the abandoned thread
// and why). Only the thread named is unbound: a session bound to another since (a retry that
// already replaced it) is left as it is, and nothing is said twice.
func (q *Q) ReplaceProviderSession(ctx context.Context, session uuid.UUID, previous, reason string, at time.Time) error {
	at = domain.Timestamp(at)
	err := q.atomic(ctx, func(q *Q) error {
		hs, err := q.GetHostSession(ctx, session)
		if err != nil {
			return err
		}
		if hs.ProviderSessionID != previous || previous == "" {
			return nil
		}
		return q.unbindThread(ctx, hs, reason, at)
	})
	if err != nil {
		return fmt.Errorf("replace provider session of %s: %w", session, err)
	}
	return nil
}

// unbindThread unbinds hs's provider thread and tells its room why, inside the caller's
// transaction.
func (q *Q) unbindThread(ctx context.Context, hs domain.HostSession, reason string, at time.Time) error {
	at = domain.Timestamp(at)
	if _, err := q.exec(ctx, `UPDATE runtime_sessions SET provider_session_id = NULL, provider_session_kind = NULL, updated_at = ? WHERE id = ?`,
		at, hs.RuntimeSessionID); err != nil {
		return err
	}
	_, err := q.appendEvents(ctx, at, NewEvent(domain.EventThreadReplaced, &hs.RoomID, &hs.AgentID, map[string]any{
		"runtime_session": hs.RuntimeSessionID, "previous_provider_session": hs.ProviderSessionID, "reason": domain.Truncate(reason, 1000),
	}))
	return err
}

// ErrEvidenceChanged: the continuity evidence an operator confirmed is not the evidence now.
var ErrEvidenceChanged = errors.New("the continuity evidence changed")

// StartSessionFresh is the store half of an operator's start-fresh of a host-native session:
// under the evidence the operator confirmed (its checksum), the session's unresumable thread
// is unbound (the room told which, and that an operator did it) and its failure cleared, so
// its next start begins a new thread. A refusal says why: the evidence changed, or the
// session does not fail for want of an exact resume.
func (q *Q) StartSessionFresh(ctx context.Context, session uuid.UUID, checksum string, at time.Time) error {
	return q.atomic(ctx, func(q *Q) error {
		hs, err := q.GetHostSession(ctx, session)
		if err != nil {
			return err
		}
		ev := domain.SessionEvidence(hs.RuntimeSessionID, hs.ProviderSessionID, hs.Config.ResumePolicy, hs.Failure)
		switch {
		case ev.EvidenceChecksum != checksum:
			return ErrEvidenceChanged
		case !ev.CanStartFresh:
			return domain.Refuse("session %s does not fail for want of an exact resume: start-fresh is not offered", session)
		}
		if err := q.ReplaceProviderSession(ctx, session, hs.ProviderSessionID, "an operator started the session fresh: "+hs.Failure.Reason, at); err != nil {
			return err
		}
		return q.ClearRuntimeFailure(ctx, session, at)
	})
}
