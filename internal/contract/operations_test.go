package contract

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"

	"github.com/jam-dev/jam/internal/domain"
)

// TestObservingAFinishedUpdateWithoutWaitingSeesItsResult: an update's outcome is read by
// polling its handle; asked with no wait, Observe must still give the poll time to answer.
func TestObservingAFinishedUpdateWithoutWaitingSeesItsResult(t *testing.T) {
	c := &mocks.Client{}
	h := &mocks.WorkflowUpdateHandle{}
	c.On("GetWorkflowUpdateHandle", client.GetWorkflowUpdateHandleOptions{WorkflowID: "RuntimeHost:x", RunID: "r", UpdateID: "u"}).Return(h)
	h.On("Get", mock.Anything, mock.Anything).Run(func(args mock.Arguments) {
		ctx := args.Get(0).(context.Context)
		if ctx.Err() != nil {
			return // the poll had no time: the result is lost to the caller
		}
		*(args.Get(1).(*json.RawMessage)) = json.RawMessage(`{"action":"stop"}`)
	}).Return(func(ctx context.Context, _ any) error { return ctx.Err() })
	out, err := Observe(context.Background(), c, domain.Operation{WorkflowID: "RuntimeHost:x", RunID: "r", UpdateID: "u"}, 0)
	if err != nil || !out.Done || string(out.Result) != `{"action":"stop"}` {
		t.Fatalf("observed %+v, %v", out, err)
	}
}
