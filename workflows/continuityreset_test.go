package workflows

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

type resetEnv struct {
	env      *testsuite.TestWorkflowEnvironment
	ops      []string
	found    bool
	evidence string
	fresh    bool
}

func newResetEnv(t *testing.T) *resetEnv {
	var suite testsuite.WorkflowTestSuite
	e := &resetEnv{env: suite.NewTestWorkflowEnvironment(), evidence: "ev", fresh: true}
	e.env.RegisterActivity(&activities.Hosts{})
	e.env.RegisterActivity(&activities.Checkpoints{})
	var h *activities.Hosts
	var ck *activities.Checkpoints
	src, rep := uuid.New(), uuid.New()
	record := domain.ContinuityReset{ID: uuid.New(), Mapping: []domain.ContinuityMapping{
		{SourceSession: src, ReplacementSession: rep, Active: true}}}
	e.env.OnActivity(h.FindReset, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.FindResetInput) (activities.FindResetResult, error) {
			return activities.FindResetResult{Found: e.found, Reset: record}, nil
		})
	e.env.OnActivity(ck.InspectContinuity, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.InspectContinuityInput) (contract.ContinuityReport, error) {
			e.ops = append(e.ops, "inspect")
			return contract.ContinuityReport{Status: domain.ContinuityCorrupt, EvidenceChecksum: e.evidence, CanStartFresh: e.fresh}, nil
		})
	e.env.OnActivity(h.PrepareReset, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.PrepareResetInput) (domain.ContinuityReset, error) {
			e.ops = append(e.ops, "persist")
			return record, nil
		})
	e.env.OnActivity(h.StopMember, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.StopMemberInput) (bool, error) {
			e.ops = append(e.ops, "stop:"+string(in.Reason))
			return true, nil
		})
	e.env.OnActivity(h.ApplyReset, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.ApplyResetInput) error { e.ops = append(e.ops, "apply"); return nil })
	e.env.OnActivity(h.RetireMember, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.MemberInput) error { e.ops = append(e.ops, "retire"); return nil })
	e.env.OnActivity(h.WakeMember, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MemberInput) error {
			if in.RuntimeSession != rep {
				t.Errorf("woke %s, want the replacement", in.RuntimeSession)
			}
			e.ops = append(e.ops, "wake")
			return nil
		})
	return e
}

func TestAResetPersistsItsRecordBeforeAnyChangeAndReplaysWithoutReinspecting(t *testing.T) {
	e := newResetEnv(t)
	e.env.ExecuteWorkflow(ContinuityReset, contract.ContinuityResetInput{Host: uuid.New(), Node: "n1", EvidenceChecksum: "ev"})
	if err := e.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"inspect", "persist", "stop:operator", "apply", "retire", "wake"}; !equalOps(e.ops, want) {
		t.Fatalf("ops %v, want %v", e.ops, want)
	}
	replay := newResetEnv(t)
	replay.found = true
	replay.env.ExecuteWorkflow(ContinuityReset, contract.ContinuityResetInput{Host: uuid.New(), Node: "n1", EvidenceChecksum: "other"})
	if want := []string{"stop:operator", "apply", "retire", "wake"}; replay.env.GetWorkflowError() != nil || !equalOps(replay.ops, want) {
		t.Fatalf("replay ops %v (%v), want %v", replay.ops, replay.env.GetWorkflowError(), want)
	}
}

func TestAResetOnChangedEvidenceOrALiveRuntimeChangesNothing(t *testing.T) {
	for name, mutate := range map[string]func(*resetEnv){
		"evidence changed": func(e *resetEnv) { e.evidence = "newer" },
		"runtime running":  func(e *resetEnv) { e.fresh = false },
	} {
		t.Run(name, func(t *testing.T) {
			e := newResetEnv(t)
			mutate(e)
			e.env.ExecuteWorkflow(ContinuityReset, contract.ContinuityResetInput{Host: uuid.New(), Node: "n1", EvidenceChecksum: "ev"})
			err := e.env.GetWorkflowError()
			if !contract.Is(err, domain.ErrTypeEvidenceChanged) && !contract.Is(err, domain.ErrTypeNotResettable) {
				t.Fatalf("error %v", err)
			}
			if !equalOps(e.ops, []string{"inspect"}) {
				t.Fatalf("ops %v", e.ops)
			}
		})
	}
}

// A deletion replayed after its payload went resumes at the recorded stage: the retention
// check (which would now fail) and the removal are not repeated.
func TestACheckpointDeletionResumesFromItsRecordedStage(t *testing.T) {
	for name, c := range map[string]struct {
		rec  *domain.CheckpointDeletion
		want []string
	}{
		"new":             {nil, []string{"retention", "stage:prepared", "remove", "stage:payload_removed", "stage:succeeded"}},
		"payload removed": {&domain.CheckpointDeletion{Stage: domain.DeletionPayloadRemoved}, []string{"stage:succeeded"}},
	} {
		t.Run(name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.RegisterActivity(&activities.Hosts{})
			env.RegisterActivity(&activities.Checkpoints{})
			var h *activities.Hosts
			var ck *activities.Checkpoints
			var ops []string
			env.OnActivity(h.FindDeletion, mock.Anything, mock.Anything).Return(c.rec, nil)
			env.OnActivity(ck.CheckRetention, mock.Anything, mock.Anything).Return(
				func(context.Context, activities.CheckpointRef) error { ops = append(ops, "retention"); return nil })
			env.OnActivity(ck.RemovePayload, mock.Anything, mock.Anything).Return(
				func(context.Context, activities.CheckpointRef) error { ops = append(ops, "remove"); return nil })
			env.OnActivity(h.WriteDeletionStage, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.DeletionStageInput) (domain.CheckpointDeletion, error) {
					ops = append(ops, "stage:"+string(in.Stage))
					return domain.CheckpointDeletion{Stage: in.Stage}, nil
				})
			env.ExecuteWorkflow(CheckpointDeletion, contract.CheckpointDeletionInput{Checkpoint: uuid.New(), Host: uuid.New(), Node: "n1"})
			if env.GetWorkflowError() != nil || !equalOps(ops, c.want) {
				t.Fatalf("ops %v (%v), want %v", ops, env.GetWorkflowError(), c.want)
			}
		})
	}
}
