package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// CheckpointDeletion deletes one checkpoint's payload when the retention inventory allows
// it: it checks retention (fresh, on the node), persists Prepared before anything goes,
// removes the payload, records PayloadRemoved (stamping the record's payload_deleted_at) and
// Succeeded. The metadata record is never deleted. A replay resumes from the recorded stage.
func CheckpointDeletion(ctx workflow.Context, in contract.CheckpointDeletionInput) (domain.CheckpointDeletion, error) {
	var h *activities.Hosts
	var ck *activities.Checkpoints
	ref := activities.CheckpointRef{Checkpoint: in.Checkpoint, Host: in.Host}
	jam := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         contract.Retry(temporal.RetryPolicy{MaximumInterval: 30 * time.Second}),
	})
	node := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: contract.NodeTaskQueue(in.Node), ScheduleToStartTimeout: nodeScheduleToStart, StartToCloseTimeout: 10 * time.Minute,
		RetryPolicy: contract.Retry(temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 5}),
	})
	var rec *domain.CheckpointDeletion
	if err := workflow.ExecuteActivity(jam, h.FindDeletion, ref).Get(ctx, &rec); err != nil {
		return domain.CheckpointDeletion{}, err
	}
	stage := func(s domain.DeletionStage) (domain.CheckpointDeletion, error) {
		var out domain.CheckpointDeletion
		err := workflow.ExecuteActivity(jam, h.WriteDeletionStage, activities.DeletionStageInput{Checkpoint: in.Checkpoint,
			Host: in.Host, Stage: s}).Get(ctx, &out)
		return out, err
	}
	if rec == nil {
		if err := workflow.ExecuteActivity(node, ck.CheckRetention, ref).Get(ctx, nil); err != nil {
			return domain.CheckpointDeletion{}, err
		}
		d, err := stage(domain.DeletionPrepared)
		if err != nil {
			return d, err
		}
		rec = &d
	}
	if rec.Stage == domain.DeletionPrepared {
		if err := workflow.ExecuteActivity(node, ck.RemovePayload, ref).Get(ctx, nil); err != nil {
			return *rec, err
		}
		d, err := stage(domain.DeletionPayloadRemoved)
		if err != nil {
			return d, err
		}
		rec = &d
	}
	if rec.Stage == domain.DeletionPayloadRemoved {
		d, err := stage(domain.DeletionSucceeded)
		if err != nil {
			return d, err
		}
		rec = &d
	}
	return *rec, nil
}
