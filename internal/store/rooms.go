package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

type roomRow struct {
	ID        uuid.UUID `db:"id"`
	Name      string    `db:"name"`
	CreatedAt time.Time `db:"created_at"`
}

func (r roomRow) domain() domain.Room {
	return domain.Room{ID: r.ID, Name: r.Name, CreatedAt: utc(r.CreatedAt)}
}

// CreateRoom inserts a room.
func (q *Q) CreateRoom(ctx context.Context, r domain.Room) (domain.Room, error) {
	r.CreatedAt = domain.Timestamp(r.CreatedAt)
	err := q.atomicIn(ctx, RoomScope(r.ID), func(q *Q) error {
		if _, err := q.exec(ctx, `INSERT INTO rooms (id, name, created_at) VALUES (?, ?, ?)`, r.ID, r.Name, r.CreatedAt); err != nil {
			return err
		}
		_, err := q.appendEvents(ctx, r.CreatedAt, NewEvent(domain.EventRoomCreated, &r.ID, nil,
			map[string]any{"id": r.ID, "name": r.Name}))
		return err
	})
	if err != nil {
		return domain.Room{}, fmt.Errorf("create room %q: %w", r.Name, err)
	}
	return r, nil
}

// GetRoom reads one room.
func (q *Q) GetRoom(ctx context.Context, id uuid.UUID) (domain.Room, error) {
	var r roomRow
	if err := q.get(ctx, &r, `SELECT * FROM rooms WHERE id = ?`, id); err != nil {
		return domain.Room{}, fmt.Errorf("get room %s: %w", id, err)
	}
	return r.domain(), nil
}

// ListRooms lists rooms, oldest first.
func (q *Q) ListRooms(ctx context.Context) ([]domain.Room, error) {
	var rows []roomRow
	if err := q.selectAll(ctx, &rows, `SELECT * FROM rooms ORDER BY created_at, id`); err != nil {
		return nil, fmt.Errorf("list rooms: %w", err)
	}
	out := make([]domain.Room, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

type participantRow struct {
	ID        uuid.UUID  `db:"id"`
	RoomID    uuid.UUID  `db:"room_id"`
	Kind      string     `db:"kind"`
	AgentID   *uuid.UUID `db:"agent_id"`
	HumanName *string    `db:"human_name"`
	Active    bool       `db:"active"`
	CreatedAt time.Time  `db:"created_at"`
	RemovedAt *time.Time `db:"removed_at"`
}

func (r participantRow) domain() domain.Participant {
	p := domain.Participant{ID: r.ID, RoomID: r.RoomID, Kind: domain.ParticipantKind(r.Kind), AgentID: r.AgentID,
		Active: r.Active, CreatedAt: utc(r.CreatedAt), RemovedAt: utcPtr(r.RemovedAt)}
	if r.HumanName != nil {
		p.HumanName = *r.HumanName
	}
	return p
}

// participantEvent is the payload of room_added and room_removed.
type participantEvent struct {
	ParticipantID uuid.UUID              `json:"participant_id"`
	Kind          domain.ParticipantKind `json:"kind"`
	AgentID       *uuid.UUID             `json:"agent_id,omitempty"`
	Human         string                 `json:"human,omitempty"`
}

func participantPayload(p domain.Participant) participantEvent {
	return participantEvent{ParticipantID: p.ID, Kind: p.Kind, AgentID: p.AgentID, Human: p.HumanName}
}

// Membership is the result of adding or removing an agent: the participant and, for an
// owned agent, the binding that the change created, reused or retired.
type Membership struct {
	Participant domain.Participant
	Agent       domain.Agent
	Binding     *domain.Binding
	Session     *domain.HostSession
	// Reused is true when an authoritative re-add reactivated a tombstoned binding.
	Reused bool
	// Fresh is true when this call made a new binding and host session: nothing was ever
	// queued for it and no runtime of it ever ran.
	Fresh bool
}

// AddAgentToRoom makes an agent a participant (room_added) and, for an owned agent, binds
// the room in the same transaction: a host session materialized from the agent's template
// and an active binding, or the tombstoned binding of an earlier membership, reused.
func (q *Q) AddAgentToRoom(ctx context.Context, room, agent uuid.UUID, at time.Time) (Membership, error) {
	return q.AddAgentToRoomWith(ctx, room, agent, TemplatePick{}, at)
}

// TemplatePick names the runtime template a new room binding is made from: by id or by
// alias; the zero pick is the agent's first template.
type TemplatePick struct {
	ID    uuid.UUID
	Alias string
}

func (p TemplatePick) zero() bool { return p.ID == uuid.Nil && p.Alias == "" }

// AddAgentToRoomWith is AddAgentToRoom with the template an owned agent's new binding is
// made from.
func (q *Q) AddAgentToRoomWith(ctx context.Context, room, agent uuid.UUID, pick TemplatePick, at time.Time) (Membership, error) {
	var m Membership
	at = domain.Timestamp(at)
	// Room scope: it writes only this room's membership, binding and new session rows, and
	// reads the agent and its templates, which only an InTx changes, so binding rooms runs
	// side by side (issue 25: the exclusive lock serialized binding 10,000 rooms).
	err := q.atomicIn(ctx, RoomScope(room), func(q *Q) error {
		if _, err := q.GetRoom(ctx, room); err != nil {
			return err
		}
		a, err := q.GetAgent(ctx, agent)
		if err != nil {
			return err
		}
		m.Agent = a
		p := domain.Participant{ID: uuid.New(), RoomID: room, Kind: domain.ParticipantAgent, AgentID: &agent, Active: true, CreatedAt: at}
		if _, err := q.exec(ctx, `
INSERT INTO room_participants (id, room_id, kind, agent_id, active, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			p.ID, room, p.Kind, agent, true, at); err != nil {
			return err
		}
		m.Participant = p
		if _, err := q.appendEvents(ctx, at, NewEvent(domain.EventRoomAdded, &room, &agent, participantPayload(p))); err != nil {
			return err
		}
		if a.Kind == domain.AgentOwned {
			return q.bindRoom(ctx, a, room, pick, at, &m)
		}
		if !pick.zero() {
			return domain.Refuse("agent %s is attached: it runs no template; add it without one", a.Name)
		}
		return nil
	})
	if err != nil {
		return Membership{}, fmt.Errorf("add agent %s to room %s: %w", agent, room, err)
	}
	return m, nil
}

// AddHumanToRoom makes a named human a participant.
func (q *Q) AddHumanToRoom(ctx context.Context, room uuid.UUID, name string, at time.Time) (domain.Participant, error) {
	at = domain.Timestamp(at)
	p := domain.Participant{ID: uuid.New(), RoomID: room, Kind: domain.ParticipantHuman, HumanName: name, Active: true, CreatedAt: at}
	err := q.atomic(ctx, func(q *Q) error {
		if _, err := q.GetRoom(ctx, room); err != nil {
			return err
		}
		if _, err := q.exec(ctx, `
INSERT INTO room_participants (id, room_id, kind, human_name, active, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			p.ID, room, p.Kind, name, true, at); err != nil {
			return err
		}
		_, err := q.appendEvents(ctx, at, NewEvent(domain.EventRoomAdded, &room, nil, participantPayload(p)))
		return err
	})
	if err != nil {
		return domain.Participant{}, fmt.Errorf("add %q to room %s: %w", name, room, err)
	}
	return p, nil
}

// RemoveParticipant ends a membership (room_removed). For an owned agent the binding becomes
// an inactive tombstone and its host session is marked removed; the runtime session and its
// provider session id stay for an authoritative re-add.
func (q *Q) RemoveParticipant(ctx context.Context, room, participant uuid.UUID, at time.Time) (Membership, error) {
	var m Membership
	at = domain.Timestamp(at)
	err := q.atomic(ctx, func(q *Q) error {
		var r participantRow
		if err := q.get(ctx, &r, `SELECT * FROM room_participants WHERE id = ? AND room_id = ? AND active`, participant, room); err != nil {
			return err
		}
		p := r.domain()
		if _, err := q.exec(ctx, `UPDATE room_participants SET active = ?, removed_at = ? WHERE id = ?`, false, at, participant); err != nil {
			return err
		}
		p.Active, p.RemovedAt = false, &at
		m.Participant = p
		if _, err := q.appendEvents(ctx, at, NewEvent(domain.EventRoomRemoved, &room, p.AgentID, participantPayload(p))); err != nil {
			return err
		}
		if err := q.cancelQuestionsOf(ctx, p, at); err != nil {
			return err
		}
		if p.AgentID == nil {
			return nil
		}
		a, err := q.GetAgent(ctx, *p.AgentID)
		if err != nil {
			return err
		}
		m.Agent = a
		if a.Kind == domain.AgentOwned {
			return q.unbindRoom(ctx, a.ID, room, at, &m)
		}
		return nil
	})
	if err != nil {
		return Membership{}, fmt.Errorf("remove participant %s from room %s: %w", participant, room, err)
	}
	return m, nil
}

// ListParticipants lists a room's active participants, in the order they joined.
func (q *Q) ListParticipants(ctx context.Context, room uuid.UUID) ([]domain.Participant, error) {
	var rows []participantRow
	if err := q.selectAll(ctx, &rows, `SELECT * FROM room_participants WHERE room_id = ? AND active ORDER BY created_at, id`, room); err != nil {
		return nil, fmt.Errorf("list participants of %s: %w", room, err)
	}
	out := make([]domain.Participant, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}
