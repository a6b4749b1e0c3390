package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

type agentRow struct {
	ID         uuid.UUID `db:"id"`
	Name       string    `db:"name"`
	Kind       string    `db:"kind"`
	Briefing   string    `db:"briefing"`
	APIKeyHash *string   `db:"api_key_hash"`
	RunIntent  string    `db:"run_intent"`
	CreatedAt  time.Time `db:"created_at"`
	UpdatedAt  time.Time `db:"updated_at"`
	// QuestionTimeoutSecs is the agent's question deadline (nil: the setting's).
	QuestionTimeoutSecs *int `db:"question_timeout_secs"`
}

func (r agentRow) domain() domain.Agent {
	return domain.Agent{
		ID: r.ID, Name: r.Name, Kind: domain.AgentKind(r.Kind), Briefing: r.Briefing,
		RunIntent: domain.RunIntent(r.RunIntent), HasAPIKey: r.APIKeyHash != nil,
		CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt), QuestionTimeoutSecs: r.QuestionTimeoutSecs,
	}
}

// agentEvent is the payload of agent events.
type agentEvent struct {
	ID        uuid.UUID        `json:"id"`
	Name      string           `json:"name"`
	Kind      domain.AgentKind `json:"kind"`
	RunIntent domain.RunIntent `json:"run_intent"`
}

func agentPayload(a domain.Agent) agentEvent {
	return agentEvent{ID: a.ID, Name: a.Name, Kind: a.Kind, RunIntent: a.RunIntent}
}

// CreateAgent inserts a new identity. It never touches an existing one: a taken name is
// ErrConflict. apiKeyHash is set for attached agents only.
func (q *Q) CreateAgent(ctx context.Context, a domain.Agent, apiKeyHash string) (domain.Agent, error) {
	a.CreatedAt, a.UpdatedAt = domain.Timestamp(a.CreatedAt), domain.Timestamp(a.CreatedAt)
	if a.RunIntent == "" {
		a.RunIntent = domain.RunIntentRunning
	}
	var hash *string
	if apiKeyHash != "" {
		hash = &apiKeyHash
		a.HasAPIKey = true
	}
	err := q.atomic(ctx, func(q *Q) error {
		if _, err := q.exec(ctx, `
INSERT INTO agents (id, name, kind, briefing, api_key_hash, run_intent, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, a.ID, a.Name, a.Kind, a.Briefing, hash, a.RunIntent, a.CreatedAt, a.UpdatedAt); err != nil {
			return err
		}
		_, err := q.appendEvents(ctx, a.CreatedAt, NewEvent(domain.EventAgentCreated, nil, &a.ID, agentPayload(a)))
		return err
	})
	if err != nil {
		return domain.Agent{}, fmt.Errorf("create agent %q: %w", a.Name, err)
	}
	return a, nil
}

// CreateOwnedAgent creates an owned agent with its first runtime template in one
// transaction: a crash (or a failed template insert) leaves neither, never an agent that
// has no template to run rooms from.
func (q *Q) CreateOwnedAgent(ctx context.Context, a domain.Agent, first domain.Template) (domain.Agent, domain.Template, error) {
	if a.Kind != domain.AgentOwned {
		return domain.Agent{}, domain.Template{}, domain.Refuse("agent %s is not owned", a.Name)
	}
	first.AgentID = a.ID
	err := q.atomic(ctx, func(q *Q) error {
		var err error
		if a, err = q.CreateAgent(ctx, a, ""); err != nil {
			return err
		}
		first, err = q.CreateTemplate(ctx, first)
		return err
	})
	if err != nil {
		return domain.Agent{}, domain.Template{}, err
	}
	return a, first, nil
}

// GetAgent reads one agent.
func (q *Q) GetAgent(ctx context.Context, id uuid.UUID) (domain.Agent, error) {
	var r agentRow
	if err := q.get(ctx, &r, `SELECT * FROM agents WHERE id = ?`, id); err != nil {
		return domain.Agent{}, fmt.Errorf("get agent %s: %w", id, err)
	}
	return r.domain(), nil
}

// AgentByKeyHash finds the attached agent whose API key hashes to hash.
func (q *Q) AgentByKeyHash(ctx context.Context, hash string) (domain.Agent, error) {
	var r agentRow
	if err := q.get(ctx, &r, `SELECT * FROM agents WHERE api_key_hash = ?`, hash); err != nil {
		return domain.Agent{}, fmt.Errorf("agent by key: %w", err)
	}
	return r.domain(), nil
}

// AgentByName finds the agent of that name.
func (q *Q) AgentByName(ctx context.Context, name string) (domain.Agent, error) {
	var r agentRow
	if err := q.get(ctx, &r, `SELECT * FROM agents WHERE name = ?`, name); err != nil {
		return domain.Agent{}, fmt.Errorf("agent by name %q: %w", name, err)
	}
	return r.domain(), nil
}

// ListAgents lists every agent by name.
func (q *Q) ListAgents(ctx context.Context) ([]domain.Agent, error) {
	var rows []agentRow
	if err := q.selectAll(ctx, &rows, `SELECT * FROM agents ORDER BY name`); err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	out := make([]domain.Agent, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// UpdateAgentBriefing replaces an agent's operator briefing.
func (q *Q) UpdateAgentBriefing(ctx context.Context, id uuid.UUID, briefing string, at time.Time) (domain.Agent, error) {
	return q.UpdateAgent(ctx, id, AgentUpdate{Briefing: &briefing}, at)
}

// AgentUpdate is an edit of an agent's operator-editable fields; what it leaves unset
// stays as it is.
type AgentUpdate struct {
	Briefing *string
	// SetQuestionTimeout replaces the agent's question deadline with QuestionTimeoutSecs:
	// nil clears it (the next source of the chain applies), 0 waits indefinitely.
	SetQuestionTimeout  bool
	QuestionTimeoutSecs *int
}

// UpdateAgent applies an edit in one write (one agent_updated event); an empty edit only
// touches updated_at.
func (q *Q) UpdateAgent(ctx context.Context, id uuid.UUID, u AgentUpdate, at time.Time) (domain.Agent, error) {
	var (
		sets   []string
		values []any
	)
	if u.Briefing != nil {
		sets, values = append(sets, `briefing = ?`), append(values, *u.Briefing)
	}
	if u.SetQuestionTimeout {
		if s := u.QuestionTimeoutSecs; s != nil && (*s < 0 || *s > domain.MaxQuestionTimeoutSecs) {
			return domain.Agent{}, &domain.ValidationError{Field: "question_timeout_secs",
				Detail: "must be between 0 and " + strconv.Itoa(domain.MaxQuestionTimeoutSecs)}
		}
		sets, values = append(sets, `question_timeout_secs = ?`), append(values, u.QuestionTimeoutSecs)
	}
	return q.updateAgent(ctx, id, at, sets, values...)
}

// SetAgentRunIntent persists whether an agent should be running; a kept stop survives restarts.
func (q *Q) SetAgentRunIntent(ctx context.Context, id uuid.UUID, intent domain.RunIntent, at time.Time) (domain.Agent, error) {
	return q.updateAgent(ctx, id, at, []string{`run_intent = ?`}, intent)
}

func (q *Q) updateAgent(ctx context.Context, id uuid.UUID, at time.Time, sets []string, values ...any) (domain.Agent, error) {
	var out domain.Agent
	err := q.atomic(ctx, func(q *Q) error {
		before, err := q.GetAgent(ctx, id)
		if err != nil {
			return err
		}
		at = domain.Timestamp(at)
		set := strings.Join(append(sets, `updated_at = ?`), ", ")
		if _, err := q.exec(ctx, `UPDATE agents SET `+set+` WHERE id = ?`, append(values, at, id)...); err != nil {
			return err
		}
		if out, err = q.GetAgent(ctx, id); err != nil {
			return err
		}
		kind := domain.EventAgentUpdated
		if before.RunIntent != out.RunIntent {
			kind = domain.EventAgentRunIntent
		}
		_, err = q.appendEvents(ctx, at, NewEvent(kind, nil, &id, agentPayload(out)))
		return err
	})
	if err != nil {
		return domain.Agent{}, fmt.Errorf("update agent %s: %w", id, err)
	}
	return out, nil
}

// DeleteAgent removes an agent and everything that is only its (templates, sessions,
// bindings, memberships, queue rows). Messages it wrote stay, without their author link.
func (q *Q) DeleteAgent(ctx context.Context, id uuid.UUID, at time.Time) error {
	at = domain.Timestamp(at)
	err := q.atomic(ctx, func(q *Q) error {
		a, err := q.GetAgent(ctx, id)
		if err != nil {
			return err
		}
		// Leave every room first, so room streams see the agent go (room_removed).
		var rows []participantRow
		if err := q.selectAll(ctx, &rows, `SELECT * FROM room_participants WHERE agent_id = ? AND active`, id); err != nil {
			return err
		}
		for _, r := range rows {
			p := r.domain()
			p.Active, p.RemovedAt = false, &at
			if _, err := q.appendEvents(ctx, at, NewEvent(domain.EventRoomRemoved, &p.RoomID, &id, participantPayload(p))); err != nil {
				return err
			}
		}
		// Runtime rows reference templates without cascading; remove them in dependency order.
		for _, stmt := range []string{
			`DELETE FROM room_bindings WHERE agent_id = ?`,
			`DELETE FROM host_sessions WHERE agent_id = ?`,
			`DELETE FROM runtime_sessions WHERE agent_id = ?`,
			`DELETE FROM agents WHERE id = ?`,
		} {
			if _, err := q.exec(ctx, stmt, id); err != nil {
				return err
			}
		}
		_, err = q.appendEvents(ctx, at, NewEvent(domain.EventAgentDeleted, nil, &id, agentPayload(a)))
		return err
	})
	if err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("delete agent %s: its runtime hosts still hold records; clean them up first: %w", id, err)
		}
		return fmt.Errorf("delete agent %s: %w", id, err)
	}
	return nil
}
