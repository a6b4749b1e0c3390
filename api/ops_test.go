package api

import (
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	updatepb "go.temporal.io/api/update/v1"
)

func accepted(id, name string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionUpdateAcceptedEventAttributes{
			WorkflowExecutionUpdateAcceptedEventAttributes: &historypb.WorkflowExecutionUpdateAcceptedEventAttributes{
				AcceptedRequest: &updatepb.Request{Meta: &updatepb.Meta{UpdateId: id}, Input: &updatepb.Input{Name: name}}}}}
}

func completed(id string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionUpdateCompletedEventAttributes{
			WorkflowExecutionUpdateCompletedEventAttributes: &historypb.WorkflowExecutionUpdateCompletedEventAttributes{
				Meta: &updatepb.Meta{UpdateId: id}}}}
}

// describe lists the updates a workflow accepted and has not completed, in order.
func TestPendingUpdatesAreTheAcceptedOnesNotCompleted(t *testing.T) {
	got := pendingUpdates([]*historypb.HistoryEvent{accepted("a", "stop"), accepted("b", "applyConfig"), completed("a"),
		accepted("c", "restart")})
	if len(got) != 2 || got[0].UpdateID != "b" || got[0].Name != "applyConfig" || got[1].UpdateID != "c" {
		t.Fatalf("pending %+v", got)
	}
	if got := pendingUpdates(nil); got == nil || len(got) != 0 {
		t.Fatalf("no history: %+v", got)
	}
}
