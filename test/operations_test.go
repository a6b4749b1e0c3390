package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// TestLongOperationsAnswer202AndAreFollowedThroughTheOperationResource: a checkpoint, a
// refused payload deletion and a host control each answer 202 with Location at once; GET
// /v1/operations/{id} walks the first to its result and the refused one to its failure
// class, and the CLI follows one with `jam operation`.
func TestLongOperationsAnswer202AndAreFollowedThroughTheOperationResource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := startSandboxDev(t)
	c := e.d.client
	agent := sandboxedAgent(t, c, "ops", domain.PlacementDedicated)
	room, session := roomWith(t, c, "ops", agent)
	awaitReply(t, c, postText(t, c, room.ID, "hello"), 60*time.Second)
	host := "/v1/hosts/" + session.String()

	start := func(path string, body any) api.OperationResource {
		t.Helper()
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+c.Token)
		req.Header.Set("Content-Type", "application/json")
		began := time.Now()
		resp, err := c.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		// Started is the answer, not the outcome (which takes longer); the bound allows for a
		// machine busy with the tests running beside this one.
		if took := time.Since(began); took > 5*time.Second {
			t.Errorf("POST %s took %s to answer; want a prompt 202", path, took)
		}
		var op api.OperationResource
		if resp.StatusCode != http.StatusAccepted || json.NewDecoder(resp.Body).Decode(&op) != nil {
			t.Fatalf("POST %s: %d, want 202 with an operation", path, resp.StatusCode)
		}
		if loc := resp.Header.Get("Location"); loc != "/v1/operations/"+op.ID.String() {
			t.Fatalf("Location %q for operation %s", loc, op.ID)
		}
		if op.Status != domain.OperationRunning || op.WorkflowID == "" || op.Target.ID != session.String() && op.Target.Kind == domain.TargetHost {
			t.Fatalf("started operation %+v", op)
		}
		return op
	}
	finish := func(op api.OperationResource) api.OperationResource {
		t.Helper()
		wait.Eventually(t, 90*time.Second, func() bool {
			must(t, c.Do(ctx, http.MethodGet, "/v1/operations/"+op.ID.String()+"?wait=10s", nil, &op))
			return op.Status != domain.OperationRunning
		}, "operation %s to finish", op.ID)
		return op
	}

	// A manual checkpoint: its result is the checkpoint record.
	op := finish(start(host+"/checkpoints", nil))
	var k api.CheckpointBody
	if op.Status != domain.OperationSucceeded || op.Kind != domain.OpKindCheckpoint || json.Unmarshal(op.Result, &k) != nil ||
		k.Reason != domain.CheckpointManual || op.FinishedAt == nil {
		t.Fatalf("checkpoint operation %+v", op)
	}
	// A finished operation answers the same again, from its record.
	var again api.OperationResource
	must(t, c.Do(ctx, http.MethodGet, "/v1/operations/"+op.ID.String(), nil, &again))
	if again.Status != op.Status || !bytes.Equal(again.Result, op.Result) {
		t.Fatalf("read again: %+v", again)
	}

	// Deleting the newest checkpoint's payload is refused by retention: a failed operation
	// with the error table's class and the status the route would have answered. Nobody
	// polls it: the server records its outcome and tells the event stream.
	op = start(host+"/checkpoints/"+k.ID.String()+"/delete-payload", api.DeletePayloadRequest{ConfirmPermanent: true})
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	found := errors.New("found")
	var told struct {
		Operation    uuid.UUID `json:"operation"`
		Status       string    `json:"status"`
		FailureClass string    `json:"failure_class"`
	}
	err := c.Stream(sctx, "/v1/events", "0", func(e client.Event) error {
		if e.Data.Kind == domain.EventOperationFinished && json.Unmarshal(e.Data.Payload, &told) == nil && told.Operation == op.ID {
			return found
		}
		return nil
	})
	if !errors.Is(err, found) || told.Status != string(domain.OperationFailed) || told.FailureClass != string(domain.ErrTypeRetained) {
		t.Fatalf("operation_finished for %s: %v %+v", op.ID, err, told)
	}
	op = finish(op)
	if op.Status != domain.OperationFailed || op.Failure == nil || op.Failure.Class != string(domain.ErrTypeRetained) ||
		op.Failure.Status != http.StatusConflict || !strings.Contains(op.Failure.Message, "newest") {
		t.Fatalf("refused deletion %+v (failure %+v)", op, op.Failure)
	}

	// A host control, followed by the CLI.
	op = start(host+"/control", api.HostControlRequest{Action: domain.HostStop})
	var out string
	cli := []string{"JAM_URL=" + e.d.apiURL, "JAM_HOME=" + filepath.Dir(e.d.tokenFile)}
	out, err = runJam(t, cli, "operation", "wait", op.ID.String())
	if err != nil || !strings.Contains(out, "succeeded") || !strings.Contains(out, `"stop"`) {
		t.Fatalf("jam operation wait: %v\n%s", err, out)
	}
	if out, err := runJam(t, cli, "operation", "show", op.ID.String(), "--json"); err != nil || !strings.Contains(out, `"host_control"`) {
		t.Fatalf("jam operation show: %v\n%s", err, out)
	}

	// Bad input and unknown operations.
	if err := c.Do(ctx, http.MethodGet, "/v1/operations/"+uuid.NewString(), nil, nil); !isStatus(err, http.StatusNotFound) {
		t.Fatalf("unknown operation: %v", err)
	}
	if err := c.Do(ctx, http.MethodGet, "/v1/operations/"+op.ID.String()+"?wait=soon", nil, nil); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("bad wait: %v", err)
	}
}
