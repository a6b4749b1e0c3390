package workflows

import (
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
)

// TestRecordedHistoriesReplayOnTodaysCode replays every history recorded by earlier code
// (testdata/histories/<tag>/<workflow>[.run<N>].json, written by
// test.TestRecordWorkflowHistories) against the workflows in this tree. RoomSession and
// RuntimeHost run for months: a change to their command sequence that is not behind
// workflow.GetVersion fails here. The policy is docs/workflow-versioning.md.
func TestRecordedHistoriesReplayOnTodaysCode(t *testing.T) {
	var files []string
	err := filepath.WalkDir("testdata/histories", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories under testdata/histories")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(f, "testdata/histories/"), ".json"), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			// Every workflow a worker runs (workers.go): a recorded history names its type, and
			// a child workflow it started must resolve too.
			for _, w := range []any{RoomSession, RuntimeHost, Reconcile, TemplateApply, WorkspaceOp, HostCleanup,
				CheckpointDeletion, ContinuityReset, NodeProbe, SandboxProbe, SandboxInventory, ContinuityInspection,
				CleanupInspection, HostMeasure, RemovalInspection, HostNetwork, GitHubReadiness, TemplateCheck} {
				r.RegisterWorkflow(w)
			}
			log := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err := r.ReplayWorkflowHistoryFromJSONFile(log, f); err != nil {
				t.Fatalf("replay %s: %v\n\nToday's code no longer makes the commands this recorded history holds. "+
					"Gate the change with workflow.GetVersion, keeping the old branch, and record a new "+
					"history set: see docs/workflow-versioning.md.", f, err)
			}
		})
	}
}
