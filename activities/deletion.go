package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/checkpoint"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/workspace"
)

// CheckpointRef names one checkpoint of a host.
type CheckpointRef struct {
	Checkpoint uuid.UUID `json:"checkpoint"`
	Host       uuid.UUID `json:"host"`
}

// CheckRetention refuses (retained) to let a checkpoint's payload go when the retention
// inventory keeps it: the newest of its host, one an export refers to, or one that is
// missing or corrupt on this node's disk (evidence is never destroyed). A payload already
// deleted is allowed (the deletion completes).
func (c *Checkpoints) CheckRetention(ctx context.Context, in CheckpointRef) error {
	rec, err := c.Store.GetCheckpoint(ctx, in.Checkpoint)
	if errors.Is(err, store.ErrNotFound) {
		return contract.Fail(err.Error(), domain.ErrTypeRetained, err)
	}
	if err != nil {
		return err
	}
	if rec.RuntimeHostID != in.Host {
		return contract.Fail(fmt.Sprintf("checkpoint %s is not of host %s", in.Checkpoint, in.Host), domain.ErrTypeRetained, nil)
	}
	if rec.PayloadDeletedAt != nil {
		return nil
	}
	reason, err := c.Store.RetentionRefusal(ctx, in.Checkpoint)
	if err != nil {
		return err
	}
	if reason == "" {
		paths, err := workspace.ManagedPaths(c.Layout, in.Host)
		if err != nil {
			return err
		}
		gens := checkpoint.Store{Root: paths.Checkpoints()}
		insp, err := gens.Inspect(in.Checkpoint)
		if err != nil {
			return err
		}
		if insp.Status != checkpoint.StatusComplete || insp.Manifest.Checksum != rec.ManifestChecksum {
			reason = fmt.Sprintf("it is %s on disk: kept as evidence", insp.Status)
		} else if newest, err := c.newestVerified(ctx, gens, in.Host); err != nil {
			return err
		} else if newest == in.Checkpoint {
			reason = "it is the newest checkpoint that verifies, the one an exact resume would restore"
		}
	}
	if reason != "" {
		return contract.Fail(fmt.Sprintf("checkpoint %s is retained: %s", in.Checkpoint, reason), domain.ErrTypeRetained, nil)
	}
	return nil
}

// newestVerified is the newest kept generation of the host that verifies on this disk.
func (c *Checkpoints) newestVerified(ctx context.Context, gens checkpoint.Store, host uuid.UUID) (uuid.UUID, error) {
	all, err := c.Store.ListCheckpoints(ctx, host)
	if err != nil {
		return uuid.Nil, err
	}
	for _, k := range all {
		if k.PayloadDeletedAt != nil {
			continue
		}
		in, err := gens.Inspect(k.ID)
		if err != nil {
			return uuid.Nil, err
		}
		if in.Status == checkpoint.StatusComplete && in.Manifest.Checksum == k.ManifestChecksum {
			return k.ID, nil
		}
	}
	return uuid.Nil, nil
}

// RemovePayload deletes a checkpoint generation's files on this node. Files shared with
// other generations (hard links) stay theirs. An absent payload is already removed.
func (c *Checkpoints) RemovePayload(ctx context.Context, in CheckpointRef) error {
	if in.Checkpoint == uuid.Nil {
		return contract.Fail("checkpoint is required", domain.ErrTypeValidation, nil)
	}
	paths, err := workspace.ManagedPaths(c.Layout, in.Host)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(checkpoint.Store{Root: paths.Checkpoints()}.Dir(in.Checkpoint)); err != nil {
		return fmt.Errorf("remove payload of checkpoint %s: %w", in.Checkpoint, err)
	}
	return nil
}

// DeletionStageInput writes one stage of a checkpoint deletion.
type DeletionStageInput struct {
	Checkpoint uuid.UUID            `json:"checkpoint"`
	Host       uuid.UUID            `json:"host"`
	Stage      domain.DeletionStage `json:"stage"`
}

// WriteDeletionStage persists a deletion stage through the forward-only validator.
func (h *Hosts) WriteDeletionStage(ctx context.Context, in DeletionStageInput) (domain.CheckpointDeletion, error) {
	now := time.Now()
	d := domain.CheckpointDeletion{CheckpointID: in.Checkpoint, RuntimeHostID: in.Host, Stage: in.Stage, CreatedAt: now, UpdatedAt: now}
	if prev, err := h.Store.GetCheckpointDeletion(ctx, in.Checkpoint); err == nil {
		d.CreatedAt = prev.CreatedAt
	}
	if _, err := h.Store.WriteCheckpointDeletion(ctx, d); err != nil {
		var te *domain.TransitionError
		if errors.As(err, &te) {
			return domain.CheckpointDeletion{}, contract.Fail(err.Error(), domain.ErrTypeValidation, err)
		}
		return domain.CheckpointDeletion{}, err
	}
	return h.Store.GetCheckpointDeletion(ctx, in.Checkpoint)
}

// FindDeletion reads a checkpoint's deletion record, if any.
func (h *Hosts) FindDeletion(ctx context.Context, in CheckpointRef) (*domain.CheckpointDeletion, error) {
	d, err := h.Store.GetCheckpointDeletion(ctx, in.Checkpoint)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &d, nil
}
