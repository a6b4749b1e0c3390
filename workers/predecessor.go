package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// predecessorWithin bounds the start-up pass that fails a killed predecessor's in-flight
// activities; whatever it does not reach times out as before.
const predecessorWithin = 30 * time.Second

// predecessor is what a starting worker knows of the workers its node ran before: the rooms
// and hosts whose activities they may have held (slots placed before this worker started,
// hosts pinned to the node), and what tells their activities from its own.
type predecessor struct {
	// self is this worker's Temporal identity; started is when it registered. An activity
	// started before that by another identity is a predecessor's.
	self     string
	started  time.Time
	sessions []uuid.UUID
	hosts    []uuid.UUID
}

// Node activities a dead worker leaves started: a turn, a start, a steer, a teardown of a
// runtime; a sandbox made ready, parked or removed, a checkpoint captured.
var (
	// runtimeLost are failed as runtime_not_live: the session tears down and wakes again.
	runtimeLost = []string{"RunTurn"}
	// retriedElsewhere are failed retryably: their next attempt runs on the new worker.
	retriedElsewhere = []string{"PrepareRuntime", "SteerTurn", "TeardownRuntime", "InterruptTurn", "EnsureSandbox",
		"ParkSandbox", "RemoveSandbox", "CaptureCheckpoint"}
)

// errWorkerRestarted fails an activity its node's previous worker held when it died.
var errWorkerRestarted = errors.New("the node's worker restarted while this ran; trying again on the new one")

// failPredecessorActivities fails the activities a killed predecessor of this node had
// started and never finished (issue 43): each would otherwise wait out its heartbeat timeout
// (15 s) before the session learns its runtime is gone, however soon the node is back. Only
// activities the predecessor started (by its Temporal identity) are touched; a predecessor
// that stopped cleanly held none. Best effort: what is not reached times out as before.
func failPredecessorActivities(ctx context.Context, c client.Client, namespace string, p predecessor, log *slog.Logger) {
	if len(p.sessions) == 0 && len(p.hosts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, predecessorWithin)
	defer cancel()
	ids := make([]string, 0, len(p.sessions)+len(p.hosts))
	for _, s := range p.sessions {
		ids = append(ids, contract.RoomSessionID(s))
	}
	for _, h := range p.hosts {
		ids = append(ids, contract.RuntimeHostID(h))
	}
	failed := 0
	for _, id := range ids {
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if contract.IsNotFound(err) {
			continue
		}
		if err != nil {
			log.Warn("describe a workflow the previous worker may have served", "workflow", id, "error", err)
			continue
		}
		run := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
		for _, pa := range d.GetPendingActivities() {
			name := pa.GetActivityType().GetName()
			if pa.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED || pa.GetLastWorkerIdentity() == p.self ||
				!pa.GetLastStartedTime().AsTime().Before(p.started) {
				continue
			}
			var cause error
			switch {
			case slices.Contains(runtimeLost, name):
				cause = contract.Fail("the node's worker restarted during the turn", domain.ErrTypeRuntimeNotLive, nil)
			case slices.Contains(retriedElsewhere, name):
				cause = errWorkerRestarted
			default:
				continue
			}
			err := c.CompleteActivityByID(ctx, namespace, id, run, pa.GetActivityId(), nil, cause)
			if err != nil && !contract.IsNotFound(err) {
				log.Warn("fail an activity the previous worker left", "workflow", id, "activity", name, "error", err)
				continue
			}
			failed++
			log.Info("failed an activity the previous worker left started, so it is retried now", "workflow", id,
				"activity", name, "attempt", pa.GetAttempt(), "worker", pa.GetLastWorkerIdentity())
		}
	}
	if failed > 0 {
		log.Info("the previous worker's in-flight activities were failed for a prompt retry", "count", failed)
	}
}

// workerIdentity is this process's Temporal worker identity: the SDK's default, pid@host@
// (the client names no task queue).
func workerIdentity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d@%s@", os.Getpid(), host)
}
