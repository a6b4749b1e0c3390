package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/internal/contract"
)

// versionSearchStage gates the JamStage search attribute (and the Jam ids upserted with it):
// histories before it upserted no search attributes.
const versionSearchStage = "search-stage"

// publishStage keeps what the Web UI and visibility queries show of a workflow current: a
// coroutine waits for stage() or details() to change, upserts JamStage (with the workflow's
// kind and ids the first time in a run, for runs started before they were set at start) and
// sets the workflow's current details. Only a stage change writes history; details are
// served by the workflow's metadata query.
//
// The returned flush waits until the coroutine has published the current stage: a workflow
// about to return calls it so its last stage is the one it ends with.
func publishStage(ctx workflow.Context, kind string, tags contract.Tags, stage, details func() string) (flush func(workflow.Context)) {
	last, lastDetails, first, on := "", "", true, false
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			if err := workflow.Await(ctx, func() bool { return stage() != last || details() != lastDetails }); err != nil {
				return
			}
			if d := details(); d != lastDetails {
				lastDetails = d
				workflow.SetCurrentDetails(ctx, d)
			}
			name := stage()
			if name == last {
				continue
			}
			last = name
			if first {
				first = false
				on = workflow.GetVersion(ctx, versionSearchStage, workflow.DefaultVersion, 1) >= 1
				if on {
					up := append(tags.Updates(kind), contract.SearchStage.ValueSet(name))
					upsert(ctx, up...)
				}
				continue
			}
			if on {
				upsert(ctx, contract.SearchStage.ValueSet(name))
			}
		}
	})
	return func(ctx workflow.Context) {
		_ = workflow.Await(ctx, func() bool { return last == stage() && lastDetails == details() })
	}
}

func upsert(ctx workflow.Context, up ...temporal.SearchAttributeUpdate) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, up...); err != nil {
		workflow.GetLogger(ctx).Warn("search attributes not upserted", "error", err)
	}
}

// withSummary labels an activity for the Web UI.
func withSummary(o workflow.ActivityOptions, summary string) workflow.ActivityOptions {
	o.Summary = summary
	return o
}
