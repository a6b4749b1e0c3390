package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

type templateRow struct {
	ID                  uuid.UUID `db:"id"`
	AgentID             uuid.UUID `db:"agent_id"`
	Alias               string    `db:"alias"`
	Config              string    `db:"config"`
	DesiredGeneration   int64     `db:"desired_generation"`
	EffectiveGeneration int64     `db:"effective_generation"`
	CreatedAt           time.Time `db:"created_at"`
	UpdatedAt           time.Time `db:"updated_at"`
}

func (r templateRow) domain() (domain.Template, error) {
	var cfg domain.TemplateConfig
	if err := json.Unmarshal([]byte(r.Config), &cfg); err != nil {
		return domain.Template{}, fmt.Errorf("template %s: stored configuration: %w", r.ID, err)
	}
	return domain.Template{
		ID: r.ID, AgentID: r.AgentID, Config: cfg, DesiredGeneration: r.DesiredGeneration,
		EffectiveGeneration: r.EffectiveGeneration, CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt),
	}, nil
}

type templateEvent struct {
	ID                uuid.UUID `json:"id"`
	Alias             string    `json:"alias"`
	DesiredGeneration int64     `json:"desired_generation"`
}

func encodeConfig(c domain.TemplateConfig) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode template: %w", err)
	}
	return string(b), nil
}

// CreateTemplate stores a new template of an owned agent at desired generation 1; the saved
// template itself is never "effective" (that is a room's state), so effective stays 0.
func (q *Q) CreateTemplate(ctx context.Context, t domain.Template) (domain.Template, error) {
	t.CreatedAt = domain.Timestamp(t.CreatedAt)
	t.UpdatedAt, t.DesiredGeneration, t.EffectiveGeneration = t.CreatedAt, 1, 0
	cfg, err := encodeConfig(t.Config)
	if err != nil {
		return domain.Template{}, err
	}
	err = q.atomic(ctx, func(q *Q) error {
		a, err := q.GetAgent(ctx, t.AgentID)
		if err != nil {
			return err
		}
		if a.Kind != domain.AgentOwned {
			return domain.Refuse("runtime templates belong to owned agents; %s is attached", a.Name)
		}
		if _, err := q.exec(ctx, `
INSERT INTO runtime_templates (id, agent_id, alias, config, desired_generation, effective_generation, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, t.ID, t.AgentID, t.Config.Alias, cfg, t.DesiredGeneration, t.EffectiveGeneration,
			t.CreatedAt, t.UpdatedAt); err != nil {
			return err
		}
		_, err = q.appendEvents(ctx, t.CreatedAt, NewEvent(domain.EventTemplateSaved, nil, &t.AgentID,
			templateEvent{ID: t.ID, Alias: t.Config.Alias, DesiredGeneration: t.DesiredGeneration}))
		return err
	})
	if err != nil {
		return domain.Template{}, fmt.Errorf("create template %q: %w", t.Config.Alias, err)
	}
	return t, nil
}

// GetTemplate reads one template.
func (q *Q) GetTemplate(ctx context.Context, id uuid.UUID) (domain.Template, error) {
	var r templateRow
	if err := q.get(ctx, &r, `SELECT * FROM runtime_templates WHERE id = ?`, id); err != nil {
		return domain.Template{}, fmt.Errorf("get template %s: %w", id, err)
	}
	return r.domain()
}

// ListTemplates lists an agent's templates, oldest first (the first is the room default).
func (q *Q) ListTemplates(ctx context.Context, agent uuid.UUID) ([]domain.Template, error) {
	var rows []templateRow
	if err := q.selectAll(ctx, &rows, `SELECT * FROM runtime_templates WHERE agent_id = ? ORDER BY created_at, id`, agent); err != nil {
		return nil, fmt.Errorf("list templates of %s: %w", agent, err)
	}
	out := make([]domain.Template, len(rows))
	for i, r := range rows {
		t, err := r.domain()
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// SaveTemplate writes an edited configuration at desired = max(family desired) + 1, where
// the family is the template and every room session made from it. Room sessions keep their
// own configuration: applying a save to rooms is the TemplateApply workflow's job.
func (q *Q) SaveTemplate(ctx context.Context, id uuid.UUID, c domain.TemplateConfig, at time.Time) (domain.Template, error) {
	cfg, err := encodeConfig(c)
	if err != nil {
		return domain.Template{}, err
	}
	var out domain.Template
	err = q.atomic(ctx, func(q *Q) error {
		cur, err := q.GetTemplate(ctx, id)
		if err != nil {
			return err
		}
		var family int64
		if err := q.get(ctx, &family, `
SELECT COALESCE(MAX(desired_generation), 0) FROM host_sessions WHERE template_id = ?`, id); err != nil {
			return err
		}
		next := max(cur.DesiredGeneration, family) + 1
		at = domain.Timestamp(at)
		if _, err := q.exec(ctx, `UPDATE runtime_templates SET alias = ?, config = ?, desired_generation = ?, updated_at = ? WHERE id = ?`,
			c.Alias, cfg, next, at, id); err != nil {
			return err
		}
		if out, err = q.GetTemplate(ctx, id); err != nil {
			return err
		}
		_, err = q.appendEvents(ctx, at, NewEvent(domain.EventTemplateSaved, nil, &cur.AgentID,
			templateEvent{ID: id, Alias: c.Alias, DesiredGeneration: next}))
		return err
	})
	if err != nil {
		return domain.Template{}, fmt.Errorf("save template %s: %w", id, err)
	}
	return out, nil
}
