package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

var (
	// ErrPermissionSettled: the permission request already left pending another way; a
	// different second decision is refused.
	ErrPermissionSettled = fmt.Errorf("%w: the permission request is already settled differently", ErrConflict)
	// ErrNoPendingPermission: no pending permission request of the room has the id prefix.
	ErrNoPendingPermission = fmt.Errorf("%w: no pending permission request matches", ErrNotFound)
)

// AmbiguousPrefixError: more than one pending permission request of the room starts with
// the id prefix.
type AmbiguousPrefixError struct {
	Room   uuid.UUID
	Prefix string
}

func (e *AmbiguousPrefixError) Error() string {
	return fmt.Sprintf("id prefix %q matches more than one pending permission request in room %s", e.Prefix, e.Room)
}

// MinPermissionPrefix is the shortest id prefix a room reply may name a permission by.
const MinPermissionPrefix = 8

var permissionPrefix = regexp.MustCompile(`^[0-9a-f-]{8,36}$`)

// PermissionFilter narrows ListPermissions; nil fields match everything. Limit bounds the
// listing (newest first); 0 means DefaultPermissionLimit.
type PermissionFilter struct {
	State *domain.PermissionState
	Agent *uuid.UUID
	Room  *uuid.UUID
	Limit int
}

// DefaultPermissionLimit is how many requests ListPermissions returns when no limit is given.
const DefaultPermissionLimit = 100

type permissionRow struct {
	ID               uuid.UUID  `db:"id"`
	AgentID          uuid.UUID  `db:"agent_id"`
	RoomID           *uuid.UUID `db:"room_id"`
	RuntimeSessionID *uuid.UUID `db:"runtime_session_id"`
	ToolKey          string     `db:"tool_key"`
	Title            string     `db:"title"`
	Summary          string     `db:"summary"`
	State            string     `db:"state"`
	Decision         *string    `db:"decision"`
	DecidedBy        *string    `db:"decided_by"`
	Reason           string     `db:"reason"`
	CreatedAt        time.Time  `db:"created_at"`
	DecidedAt        *time.Time `db:"decided_at"`
	DeadlineAt       *time.Time `db:"deadline_at"`
}

const permissionColumns = `id, agent_id, room_id, runtime_session_id, tool_key, title, summary, state, decision,
decided_by, reason, created_at, decided_at, deadline_at`

func (r permissionRow) domain() domain.Permission {
	p := domain.Permission{ID: r.ID, AgentID: r.AgentID, RoomID: r.RoomID, RuntimeSession: r.RuntimeSessionID,
		ToolKey: r.ToolKey, Title: r.Title, Summary: r.Summary, State: domain.PermissionState(r.State),
		Reason: r.Reason, CreatedAt: utc(r.CreatedAt), DecidedAt: utcPtr(r.DecidedAt), Deadline: utcPtr(r.DeadlineAt)}
	if r.Decision != nil {
		p.Decision = domain.PermissionDecision(*r.Decision)
	}
	if r.DecidedBy != nil {
		p.DecidedBy = *r.DecidedBy
	}
	return p
}

// permissionEvent is the payload of runtime_permission_requested and _decided.
type permissionEvent struct {
	ID               uuid.UUID                 `json:"id"`
	RuntimeSessionID *uuid.UUID                `json:"runtime_session_id,omitempty"`
	ToolKey          string                    `json:"tool_key"`
	Title            string                    `json:"title"`
	Summary          string                    `json:"summary,omitempty"`
	State            domain.PermissionState    `json:"state"`
	Decision         domain.PermissionDecision `json:"decision,omitempty"`
	DecidedBy        string                    `json:"decided_by,omitempty"`
	Reason           string                    `json:"reason,omitempty"`
	DeadlineAt       *time.Time                `json:"deadline_at,omitempty"`
	// MessageID is the room reply that decided the request, if one did.
	MessageID *uuid.UUID `json:"message_id,omitempty"`
}

func permissionEventOf(kind domain.EventKind, p domain.Permission, message *uuid.UUID) domain.Event {
	ev := permissionEvent{ID: p.ID, RuntimeSessionID: p.RuntimeSession, ToolKey: p.ToolKey, Title: p.Title,
		State: p.State, Decision: p.Decision, DecidedBy: p.DecidedBy, Reason: p.Reason, DeadlineAt: p.Deadline,
		MessageID: message}
	if kind == domain.EventRuntimePermissionAsked {
		ev.Summary = p.Summary
	}
	return NewEvent(kind, p.RoomID, &p.AgentID, ev)
}

// nilIfZero stores uuid.Nil as NULL.
func nilIfZero(id *uuid.UUID) *uuid.UUID {
	if id == nil || *id == uuid.Nil {
		return nil
	}
	return id
}

// CreatePermission records a pending permission request and appends
// runtime_permission_requested, in one transaction. p.State, decision and decider are
// ignored: a new request is pending.
func (q *Q) CreatePermission(ctx context.Context, p domain.Permission) (domain.Permission, error) {
	p.CreatedAt = domain.Timestamp(p.CreatedAt)
	if p.Deadline != nil {
		d := domain.Timestamp(*p.Deadline)
		p.Deadline = &d
	}
	p.RoomID, p.RuntimeSession = nilIfZero(p.RoomID), nilIfZero(p.RuntimeSession)
	p.State, p.Decision, p.DecidedBy, p.DecidedAt = domain.PermissionPending, "", "", nil
	err := q.atomic(ctx, func(q *Q) error {
		if _, err := q.exec(ctx, `
INSERT INTO runtime_permissions (id, agent_id, room_id, runtime_session_id, tool_key, title, summary, state, reason, created_at, deadline_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, p.ID, p.AgentID, p.RoomID, p.RuntimeSession, p.ToolKey, p.Title, p.Summary,
			p.State, p.Reason, p.CreatedAt, p.Deadline); err != nil {
			return err
		}
		_, err := q.appendEvents(ctx, p.CreatedAt, permissionEventOf(domain.EventRuntimePermissionAsked, p, nil))
		return err
	})
	if err != nil {
		return domain.Permission{}, fmt.Errorf("create permission request for agent %s: %w", p.AgentID, err)
	}
	return p, nil
}

// GetPermission reads one permission request.
func (q *Q) GetPermission(ctx context.Context, id uuid.UUID) (domain.Permission, error) {
	var r permissionRow
	if err := q.get(ctx, &r, `SELECT `+permissionColumns+` FROM runtime_permissions WHERE id = ?`, id); err != nil {
		return domain.Permission{}, fmt.Errorf("get permission %s: %w", id, err)
	}
	return r.domain(), nil
}

// ListPermissions lists permission requests, newest first.
func (q *Q) ListPermissions(ctx context.Context, f PermissionFilter) ([]domain.Permission, error) {
	var (
		where []string
		args  []any
	)
	if f.State != nil {
		where, args = append(where, "state = ?"), append(args, *f.State)
	}
	if f.Agent != nil {
		where, args = append(where, "agent_id = ?"), append(args, *f.Agent)
	}
	if f.Room != nil {
		where, args = append(where, "room_id = ?"), append(args, *f.Room)
	}
	query := `SELECT ` + permissionColumns + ` FROM runtime_permissions`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultPermissionLimit
	}
	query += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	var rows []permissionRow
	if err := q.selectAll(ctx, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("list permissions: %w", err)
	}
	out := make([]domain.Permission, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// DecidePermission answers a pending permission request: allow_once and allow_always allow
// it, deny denies it; allow_always also records the agent's always-rule for the tool key, in
// the same transaction. An identical retry returns the record and changes nothing; another
// decision after the request left pending is ErrPermissionSettled (an ErrConflict).
func (q *Q) DecidePermission(ctx context.Context, id uuid.UUID, decision domain.PermissionDecision, decidedBy, reason string, at time.Time) (domain.Permission, error) {
	var p domain.Permission
	err := q.atomic(ctx, func(q *Q) error {
		var err error
		p, err = q.decidePermission(ctx, id, decision, decidedBy, reason, domain.Timestamp(at), nil)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrPermissionSettled) {
			return domain.Permission{}, err
		}
		return domain.Permission{}, fmt.Errorf("decide permission %s: %w", id, err)
	}
	return p, nil
}

// decidePermission is DecidePermission inside the caller's transaction; message is the room
// reply that decided it, if any.
func (q *Q) decidePermission(ctx context.Context, id uuid.UUID, decision domain.PermissionDecision, decidedBy, reason string, at time.Time, message *uuid.UUID) (domain.Permission, error) {
	if _, err := domain.PermissionDecisions.Parse(string(decision)); err != nil {
		return domain.Permission{}, err
	}
	p, err := q.GetPermission(ctx, id)
	if err != nil {
		return p, err
	}
	if p.State != domain.PermissionPending {
		if p.Decision == decision {
			return p, nil
		}
		return p, ErrPermissionSettled
	}
	p.State = domain.PermissionDenied
	if decision.Allows() {
		p.State = domain.PermissionAllowed
	}
	p.Decision, p.DecidedBy, p.Reason, p.DecidedAt = decision, decidedBy, reason, &at
	if _, err := q.exec(ctx, `
UPDATE runtime_permissions SET state = ?, decision = ?, decided_by = ?, reason = ?, decided_at = ? WHERE id = ? AND state = ?`,
		p.State, p.Decision, p.DecidedBy, p.Reason, at, id, domain.PermissionPending); err != nil {
		return p, err
	}
	if decision == domain.PermissionAllowAlways {
		if _, err := q.exec(ctx, `
INSERT INTO permission_rules (agent_id, tool_key, created_at) VALUES (?, ?, ?)
ON CONFLICT (agent_id, tool_key) DO NOTHING`, p.AgentID, p.ToolKey, at); err != nil {
			return p, err
		}
	}
	_, err = q.appendEvents(ctx, at, permissionEventOf(domain.EventRuntimePermissionDecided, p, message))
	return p, err
}

// ClosePermission ends a pending request nobody decided: expired (its deadline passed) or
// cancelled (the turn that asked ended first). Closing it again the same way returns the
// record; a request that left pending otherwise is ErrPermissionSettled.
func (q *Q) ClosePermission(ctx context.Context, id uuid.UUID, state domain.PermissionState, reason string, at time.Time) (domain.Permission, error) {
	if state != domain.PermissionExpired && state != domain.PermissionCancelled {
		return domain.Permission{}, fmt.Errorf("close permission %s as %q: only %s or %s", id, state,
			domain.PermissionExpired, domain.PermissionCancelled)
	}
	at = domain.Timestamp(at)
	var p domain.Permission
	err := q.atomic(ctx, func(q *Q) error {
		var err error
		if p, err = q.GetPermission(ctx, id); err != nil {
			return err
		}
		if p.State != domain.PermissionPending {
			if p.State == state {
				return nil
			}
			return ErrPermissionSettled
		}
		p.State, p.Reason, p.DecidedAt = state, reason, &at
		if _, err := q.exec(ctx, `UPDATE runtime_permissions SET state = ?, reason = ?, decided_at = ? WHERE id = ? AND state = ?`,
			p.State, p.Reason, at, id, domain.PermissionPending); err != nil {
			return err
		}
		_, err = q.appendEvents(ctx, at, permissionEventOf(domain.EventRuntimePermissionDecided, p, nil))
		return err
	})
	if err != nil {
		if errors.Is(err, ErrPermissionSettled) {
			return domain.Permission{}, err
		}
		return domain.Permission{}, fmt.Errorf("close permission %s: %w", id, err)
	}
	return p, nil
}

// HasPermissionRule reports whether the agent has an always-rule for the tool key.
func (q *Q) HasPermissionRule(ctx context.Context, agent uuid.UUID, toolKey string) (bool, error) {
	var n int
	if err := q.get(ctx, &n, `SELECT COUNT(*) FROM permission_rules WHERE agent_id = ? AND tool_key = ?`, agent, toolKey); err != nil {
		return false, fmt.Errorf("permission rule of agent %s for %q: %w", agent, toolKey, err)
	}
	return n > 0, nil
}

// FindPendingPermissionByPrefix finds the one pending request of the room whose id (in its
// canonical lowercase form) starts with prefix, at least MinPermissionPrefix characters long.
// None is ErrNoPendingPermission (an ErrNotFound); several is an *AmbiguousPrefixError.
func (q *Q) FindPendingPermissionByPrefix(ctx context.Context, room uuid.UUID, prefix string) (domain.Permission, error) {
	if !permissionPrefix.MatchString(prefix) {
		return domain.Permission{}, &domain.ValidationError{Field: "id",
			Detail: fmt.Sprintf("must be at least %d characters of a lowercase permission id", MinPermissionPrefix)}
	}
	// The prefix holds only hex digits and hyphens, none of them LIKE wildcards.
	var rows []permissionRow
	if err := q.selectAll(ctx, &rows, `SELECT `+permissionColumns+` FROM runtime_permissions
WHERE room_id = ? AND state = ? AND CAST(id AS TEXT) LIKE ? ORDER BY id LIMIT 2`,
		room, domain.PermissionPending, prefix+"%"); err != nil {
		return domain.Permission{}, fmt.Errorf("find pending permission %q in room %s: %w", prefix, room, err)
	}
	switch len(rows) {
	case 0:
		return domain.Permission{}, ErrNoPendingPermission
	case 1:
		return rows[0].domain(), nil
	default:
		return domain.Permission{}, &AmbiguousPrefixError{Room: room, Prefix: prefix}
	}
}

// PostPermissionReply is a human's room reply that decides a pending permission request
// ("approve <id>", "deny <id>"): in one transaction it posts m to the room, decides the
// room's one pending request whose id starts with prefix, and settles every inbound row the
// message queued as an acknowledgement, so no agent receives the reply as a turn. When no
// pending request of the room matches it writes nothing and returns ErrNoPendingPermission
// (or an *AmbiguousPrefixError), and the caller posts m as an ordinary message.
func (q *Q) PostPermissionReply(ctx context.Context, m domain.Message, prefix string, decision domain.PermissionDecision, decidedBy string) (domain.Message, domain.Permission, error) {
	if m.AuthorKind != domain.ParticipantHuman {
		return domain.Message{}, domain.Permission{}, domain.Refuse("only a human decides a permission request in the room")
	}
	m.CreatedAt = domain.Timestamp(m.CreatedAt)
	var p domain.Permission
	err := q.atomic(ctx, func(q *Q) error {
		var err error
		if p, err = q.FindPendingPermissionByPrefix(ctx, m.RoomID, prefix); err != nil {
			return err
		}
		if m, err = q.postMessage(ctx, m); err != nil {
			return err
		}
		if p, err = q.decidePermission(ctx, p.ID, decision, decidedBy, "", m.CreatedAt, &m.ID); err != nil {
			return err
		}
		return q.ackAll(ctx, m.ID, m.CreatedAt)
	})
	if err != nil {
		var ambiguous *AmbiguousPrefixError
		if errors.Is(err, ErrNoPendingPermission) || errors.As(err, &ambiguous) {
			return domain.Message{}, domain.Permission{}, err
		}
		return domain.Message{}, domain.Permission{}, fmt.Errorf("post permission reply to room %s: %w", m.RoomID, err)
	}
	return m, p, nil
}

// ackAll settles every unsettled inbound row of a message as an acknowledgement.
func (q *Q) ackAll(ctx context.Context, message uuid.UUID, at time.Time) error {
	return q.ackAllBut(ctx, message, uuid.Nil, at)
}

// ackAllBut acknowledges the message for every agent it is queued for but keep.
func (q *Q) ackAllBut(ctx context.Context, message, keep uuid.UUID, at time.Time) error {
	var agents []uuid.UUID
	if err := q.selectAll(ctx, &agents, `SELECT agent_id FROM inbound WHERE message_id = ? AND state <> ? ORDER BY agent_id`,
		message, domain.InboundSettled); err != nil {
		return err
	}
	for _, a := range agents {
		if a == keep {
			continue
		}
		if _, _, err := q.settle(ctx, a, message, domain.SettledAck, "", at); err != nil {
			return fmt.Errorf("acknowledge %s for agent %s: %w", message, a, err)
		}
	}
	return nil
}
