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

// A room session's configuration moves in three durable fields: desired (what the operator
// saved), effective (what a runtime accepted) and the pending change in flight. The stored
// config is always the effective one: a candidate replaces it only when a runtime accepted
// it (or the room had no runtime to preserve), and only while its generation is still the
// template's desired one — a late answer from a superseded save never commits.

// ErrSuperseded: the generation is no longer the template's desired one; a newer save
// replaced it, and nothing was changed.
var ErrSuperseded = errors.New("a newer save of the template superseded this generation")

// RequestApply marks every session of the template (removed ones included: a re-add runs
// the configuration it has) with the template's desired generation and a requested pending
// change, in the transaction of the save.
func (q *Q) requestApply(ctx context.Context, template uuid.UUID, gen int64, at time.Time) error {
	pc, err := json.Marshal(domain.PendingChange{Status: domain.PendingRequested, Generation: gen})
	if err != nil {
		return err
	}
	_, err = q.exec(ctx, `UPDATE host_sessions SET desired_generation = ?, pending_change = ?, updated_at = ?
WHERE template_id = ? AND effective_generation < ?`, gen, string(pc), at, template, gen)
	return err
}

// SaveTemplateAndRequestApply saves a template edit at a new desired generation and marks
// every room session made from it with a requested change, atomically.
func (q *Q) SaveTemplateAndRequestApply(ctx context.Context, id uuid.UUID, c domain.TemplateConfig, at time.Time) (domain.Template, error) {
	var out domain.Template
	err := q.atomic(ctx, func(q *Q) error {
		t, err := q.SaveTemplate(ctx, id, c, at)
		if err != nil {
			return err
		}
		out = t
		return q.requestApply(ctx, id, t.DesiredGeneration, domain.Timestamp(at))
	})
	return out, err
}

// TemplateSessions lists the runtime sessions made from a template.
func (q *Q) TemplateSessions(ctx context.Context, template uuid.UUID) ([]domain.HostSession, error) {
	var rows []hostSessionRow
	if err := q.selectAll(ctx, &rows, hostSessionSelect+` WHERE h.template_id = ? ORDER BY h.created_at, h.runtime_session_id`, template); err != nil {
		return nil, fmt.Errorf("sessions of template %s: %w", template, err)
	}
	out := make([]domain.HostSession, 0, len(rows))
	for _, r := range rows {
		hs, err := r.domain()
		if err != nil {
			return nil, err
		}
		out = append(out, hs)
	}
	return out, nil
}

// current loads the session and its template and fences gen against the template's desired
// generation.
func (q *Q) current(ctx context.Context, session uuid.UUID, gen int64) (domain.HostSession, domain.Template, error) {
	hs, err := q.GetHostSession(ctx, session)
	if err != nil {
		return hs, domain.Template{}, err
	}
	t, err := q.GetTemplate(ctx, hs.TemplateID)
	if err != nil {
		return hs, t, err
	}
	if t.DesiredGeneration != gen {
		return hs, t, fmt.Errorf("session %s, generation %d (template desires %d): %w", session, gen, t.DesiredGeneration, ErrSuperseded)
	}
	return hs, t, nil
}

func (q *Q) setPending(ctx context.Context, session uuid.UUID, pc *domain.PendingChange, at time.Time) error {
	var v *string
	if pc != nil {
		b, err := json.Marshal(pc)
		if err != nil {
			return err
		}
		s := string(b)
		v = &s
	}
	_, err := q.exec(ctx, `UPDATE host_sessions SET pending_change = ?, updated_at = ? WHERE runtime_session_id = ?`,
		v, domain.Timestamp(at), session)
	return err
}

// MarkConfigApplying records that the session's runtime is being replaced by generation gen
// (ErrSuperseded when gen is no longer desired; an effective gen is already applied).
func (q *Q) MarkConfigApplying(ctx context.Context, session uuid.UUID, gen int64, at time.Time) (applied bool, err error) {
	err = q.atomic(ctx, func(q *Q) error {
		hs, _, err := q.current(ctx, session, gen)
		if err != nil {
			return err
		}
		if hs.EffectiveGeneration >= gen {
			applied = true
			return nil
		}
		return q.setPending(ctx, session, &domain.PendingChange{Status: domain.PendingApplying, Generation: gen}, at)
	})
	return applied, err
}

// CandidateConfig is the configuration of generation gen for the session, fenced: a
// replacement built from a superseded save never takes the live binding.
func (q *Q) CandidateConfig(ctx context.Context, session uuid.UUID, gen int64) (domain.TemplateConfig, error) {
	_, t, err := q.current(ctx, session, gen)
	return t.Config, err
}

// CommitConfig makes generation gen effective for the session (its runtime accepted it, or
// it had none): the stored config becomes the template's, the pending change is cleared.
// ErrSuperseded when gen is no longer desired. Committing an effective generation again
// changes nothing.
func (q *Q) CommitConfig(ctx context.Context, session uuid.UUID, gen int64, at time.Time) error {
	return q.atomic(ctx, func(q *Q) error { return q.commitConfig(ctx, session, gen, at) })
}

func (q *Q) commitConfig(ctx context.Context, session uuid.UUID, gen int64, at time.Time) error {
	if hs, err := q.GetHostSession(ctx, session); err != nil {
		return err
	} else if hs.EffectiveGeneration >= gen {
		return nil // a retried commit whose answer was lost, even if a newer save came since
	}
	hs, t, err := q.current(ctx, session, gen)
	if err != nil {
		return err
	}
	cfg, err := encodeConfig(t.Config)
	if err != nil {
		return err
	}
	if _, err = q.exec(ctx, `UPDATE host_sessions SET config = ?, effective_generation = ?, desired_generation = ?,
    pending_change = NULL, updated_at = ? WHERE runtime_session_id = ?`, cfg, gen, max(gen, hs.DesiredGeneration), domain.Timestamp(at), session); err != nil {
		return err
	}
	return q.switchThread(ctx, hs, t.Config, gen, at)
}

// switchThread runs in the transaction that makes next the effective configuration of hs
// (generation gen): when next runs another kind of thread than the one hs is bound to (the
// room switched provider or CLI; a thread of one can never be resumed by another), the old
// thread is unbound and the room told, and the thread the candidate of gen started, if it
// recorded one, is bound in its place. A dormant room's next wake starts a new thread.
func (q *Q) switchThread(ctx context.Context, hs domain.HostSession, next domain.TemplateConfig, gen int64, at time.Time) error {
	from, to := domain.ThreadKind(hs.Config), domain.ThreadKind(next)
	if hs.ProviderSessionKind != "" {
		from = hs.ProviderSessionKind
	}
	if hs.ProviderSessionID == "" || from == to {
		return nil
	}
	reason := fmt.Sprintf("the room now runs %s (was %s): a thread of one provider cannot be resumed by another, so the room continues on a new thread", to, from)
	if err := q.unbindThread(ctx, hs, reason, at); err != nil {
		return err
	}
	if pc := hs.PendingChange; pc != nil && pc.Generation == gen && pc.Thread != "" {
		return q.BindProviderSession(ctx, hs.RuntimeSessionID, pc.Thread, pc.ThreadKind, at)
	}
	return nil
}

// RecordCandidateThread keeps the provider thread the candidate of generation gen started
// (of another kind than the session's bound thread) on its pending change, for the commit
// to bind. A pending change of another generation is left alone.
func (q *Q) RecordCandidateThread(ctx context.Context, session uuid.UUID, gen int64, thread, kind string, at time.Time) error {
	return q.atomic(ctx, func(q *Q) error {
		hs, err := q.GetHostSession(ctx, session)
		if err != nil {
			return err
		}
		pc := hs.PendingChange
		if pc == nil || pc.Generation != gen {
			return fmt.Errorf("session %s has no pending change of generation %d: %w", session, gen, ErrSuperseded)
		}
		pc.Thread, pc.ThreadKind = thread, kind
		return q.setPending(ctx, session, pc, at)
	})
}

// FailConfig records that generation gen could not be applied: the old configuration stays
// effective and is the recovery target. A newer pending change is never overwritten.
func (q *Q) FailConfig(ctx context.Context, session uuid.UUID, gen int64, reason string, at time.Time) error {
	return q.atomic(ctx, func(q *Q) error {
		hs, err := q.GetHostSession(ctx, session)
		if err != nil {
			return err
		}
		if hs.EffectiveGeneration >= gen || (hs.PendingChange != nil && hs.PendingChange.Generation > gen) {
			return nil
		}
		return q.setPending(ctx, session, &domain.PendingChange{Status: domain.PendingFailed, Generation: gen,
			Reason: domain.Truncate(reason, 1000), RecoveryTarget: hs.EffectiveGeneration}, at)
	})
}

// CommitHostReplacement recreates a runtime host's identity for generation gen of a template
// whose edit changed the host's compatibility fingerprint: the host takes the replacement
// fingerprint and every member made from the template takes the configuration, in one
// transaction (its sandbox was destroyed before; members come back in the new one).
func (q *Q) CommitHostReplacement(ctx context.Context, host, template uuid.UUID, gen int64, fingerprint string, at time.Time) error {
	return q.atomic(ctx, func(q *Q) error {
		t, err := q.GetTemplate(ctx, template)
		if err != nil {
			return err
		}
		if t.DesiredGeneration != gen {
			return fmt.Errorf("host %s, generation %d (template desires %d): %w", host, gen, t.DesiredGeneration, ErrSuperseded)
		}
		if _, err := q.exec(ctx, `UPDATE runtime_hosts SET compatibility = ?, template_id = ?, updated_at = ? WHERE id = ?`,
			fingerprint, template, domain.Timestamp(at), host); err != nil {
			return err
		}
		members, err := q.HostMembers(ctx, host)
		if err != nil {
			return err
		}
		for _, m := range members {
			hs, err := q.GetHostSession(ctx, m.RuntimeSession)
			if err != nil {
				return err
			}
			if hs.TemplateID != template {
				continue
			}
			if err := q.commitConfig(ctx, m.RuntimeSession, gen, at); err != nil {
				return err
			}
		}
		return nil
	})
}
