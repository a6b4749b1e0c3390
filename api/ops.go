package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// Operator overrides on Jam's workflows (`jam ops`): find a Jam object's workflows, see what
// one is stuck on, reset it to its last workflow task, terminate it, poke a session. Every
// answer carries the equivalent Temporal CLI command, so an operator can do the same with
// Temporal's own tools.

// opsTimeout bounds each Temporal call of an ops route.
const opsTimeout = 10 * time.Second

// maxFound bounds a find's answer.
const maxFound = 100

// OpsWorkflowBody is one Jam workflow as Temporal's visibility and describe see it.
type OpsWorkflowBody struct {
	WorkflowID string     `json:"workflow_id"`
	RunID      string     `json:"run_id"`
	Type       string     `json:"type"`
	Status     string     `json:"status"`
	Stage      string     `json:"stage,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	ClosedAt   *time.Time `json:"closed_at,omitempty"`
	// Tags are the workflow's Jam search attributes (JamRoom, JamAgent, …).
	Tags map[string]string `json:"tags,omitempty"`
	// Summary and Details are what the Web UI shows (describe only).
	Summary     string `json:"summary,omitempty"`
	Details     string `json:"details,omitempty"`
	WorkflowURL string `json:"workflow_url,omitempty"`
}

// OpsFindBody answers GET /v1/ops/workflows.
type OpsFindBody struct {
	// Query is the visibility query that found them; Temporal the same with Temporal's CLI.
	Query    string            `json:"query"`
	Temporal string            `json:"temporal"`
	Items    []OpsWorkflowBody `json:"items"`
}

// OpsActivityBody is one activity a workflow waits on.
type OpsActivityBody struct {
	ActivityID    string     `json:"activity_id"`
	Type          string     `json:"type"`
	State         string     `json:"state"`
	Attempt       int32      `json:"attempt"`
	MaxAttempts   int32      `json:"max_attempts"`
	LastFailure   string     `json:"last_failure,omitempty"`
	LastWorker    string     `json:"last_worker,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}

// OpsDescribeBody answers GET /v1/ops/workflows/{id}.
type OpsDescribeBody struct {
	Workflow          OpsWorkflowBody   `json:"workflow"`
	PendingActivities []OpsActivityBody `json:"pending_activities"`
	// WorkflowTaskPending: a workflow task is scheduled or running (a stuck one, with
	// attempts, is a workflow bug: `jam ops retry` after the fix).
	WorkflowTaskPending  bool  `json:"workflow_task_pending"`
	WorkflowTaskAttempts int32 `json:"workflow_task_attempts,omitempty"`
	// PendingUpdates were accepted by the workflow and have not completed (a stop waiting
	// for a teardown, an apply waiting for a turn's end).
	PendingUpdates []OpsUpdateBody `json:"pending_updates"`
	Temporal       string          `json:"temporal"`
}

// OpsUpdateBody is an update a workflow accepted and has not completed.
type OpsUpdateBody struct {
	UpdateID   string    `json:"update_id"`
	Name       string    `json:"name"`
	AcceptedAt time.Time `json:"accepted_at"`
}

// OpsRetryRequest is the body of POST /v1/ops/workflows/{id}/retry.
type OpsRetryRequest struct {
	Reason string `json:"reason"`
}

// OpsTerminateRequest is the body of POST /v1/ops/workflows/{id}/terminate.
type OpsTerminateRequest struct {
	Reason string `json:"reason"`
	// Force terminates a RoomSession or RuntimeHost, which are refused without it.
	Force bool `json:"force"`
}

// OpsActionBody answers an ops action.
type OpsActionBody struct {
	WorkflowID string `json:"workflow_id"`
	// RunID is the run the action made or acted on (a reset's new run).
	RunID    string `json:"run_id,omitempty"`
	Done     string `json:"done"`
	Next     string `json:"next,omitempty"`
	Temporal string `json:"temporal"`
}

// OpsReconcileBody answers GET /v1/ops/reconcile.
type OpsReconcileBody struct {
	ScheduleID string           `json:"schedule_id"`
	Paused     bool             `json:"paused"`
	Interval   string           `json:"interval,omitempty"`
	NextRunAt  *time.Time       `json:"next_run_at,omitempty"`
	LastRun    *OpsWorkflowBody `json:"last_run,omitempty"`
	// LastResult is the newest finished run's report (sessions poked, stale nodes).
	LastResult *contract.ReconcileReport `json:"last_result,omitempty"`
	Temporal   string                    `json:"temporal"`
}

// jamTagNames are the search attributes a find matches an id against.
var jamTagNames = []string{contract.SearchAgent.GetName(), contract.SearchRoom.GetName(), contract.SearchHost.GetName(),
	contract.SearchWorkspace.GetName(), contract.SearchTemplate.GetName()}

// findWorkflows lists the workflows of the Jam objects named by ?object= (an id, or an agent's
// or room's name); running ones unless ?all=true; Reconcile runs only when ?kind= asks.
func (s *Server) findWorkflows(c *gin.Context) error {
	object := strings.TrimSpace(c.Query("object"))
	if object == "" {
		return validationError(domain.Validations{{Field: "object", Detail: "an agent, room, host, workspace or template id, or an agent's or room's name"}})
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), opsTimeout)
	defer cancel()
	ids, err := s.resolveObject(ctx, object)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return notFound("an agent or room named "+object, nil)
	}
	var or []string
	for _, id := range ids {
		for _, name := range jamTagNames {
			or = append(or, fmt.Sprintf("%s = '%s'", name, id))
		}
	}
	query := "(" + strings.Join(or, " OR ") + ")"
	if kind := c.Query("kind"); kind != "" {
		if !validKind(kind) {
			return validationError(domain.Validations{{Field: "kind", Detail: "a Jam workflow type such as RoomSession"}})
		}
		query += fmt.Sprintf(" AND %s = '%s'", contract.SearchKind.GetName(), kind)
	}
	if c.Query("all") != "true" {
		query += " AND ExecutionStatus = 'Running'"
	}
	resp, err := s.cfg.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: maxFound})
	if err != nil {
		return temporalUnavailable(err)
	}
	out := OpsFindBody{Query: query, Items: []OpsWorkflowBody{},
		Temporal: fmt.Sprintf("temporal workflow list --namespace %s --query %q", s.namespace(), query)}
	for _, e := range resp.GetExecutions() {
		out.Items = append(out.Items, s.opsWorkflow(e))
	}
	c.JSON(http.StatusOK, out)
	return nil
}

// resolveObject turns an id or an agent's or room's name into ids.
func (s *Server) resolveObject(ctx context.Context, object string) ([]uuid.UUID, error) {
	if id, err := uuid.Parse(object); err == nil {
		return []uuid.UUID{id}, nil
	}
	var ids []uuid.UUID
	agents, err := s.cfg.Store.ListAgents(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range agents {
		if a.Name == object {
			ids = append(ids, a.ID)
		}
	}
	rooms, err := s.cfg.Store.ListRooms(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range rooms {
		if r.Name == object {
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
}

func validKind(kind string) bool { return contract.IsWorkflowType(kind) }

// describeWorkflow says what a workflow waits on: its pending activities with attempts and
// last failure, and a pending workflow task.
func (s *Server) describeWorkflow(c *gin.Context) error {
	id, err := s.workflowParam(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), opsTimeout)
	defer cancel()
	d, err := s.cfg.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return workflowError(id, err)
	}
	info := d.GetWorkflowExecutionInfo()
	wf := s.opsWorkflow(info)
	if p := d.GetExecutionConfig().GetUserMetadata().GetSummary(); p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &wf.Summary)
	}
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if v, err := s.cfg.Temporal.QueryWorkflow(ctx, id, "", "__temporal_workflow_metadata"); err == nil {
			var meta sdkpb.WorkflowMetadata
			if v.Get(&meta) == nil {
				wf.Details = meta.GetCurrentDetails()
			}
		}
	}
	out := OpsDescribeBody{Workflow: wf, PendingActivities: []OpsActivityBody{}, PendingUpdates: []OpsUpdateBody{},
		Temporal: fmt.Sprintf("temporal workflow describe --namespace %s --workflow-id %q", s.namespace(), id)}
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		events, err := s.history(ctx, id, wf.RunID)
		if err != nil {
			return err
		}
		out.PendingUpdates = pendingUpdates(events)
	}
	for _, a := range d.GetPendingActivities() {
		out.PendingActivities = append(out.PendingActivities, opsActivity(a))
	}
	if wt := d.GetPendingWorkflowTask(); wt != nil {
		out.WorkflowTaskPending, out.WorkflowTaskAttempts = true, wt.GetAttempt()
	}
	c.JSON(http.StatusOK, out)
	return nil
}

func opsActivity(a *workflowpb.PendingActivityInfo) OpsActivityBody {
	b := OpsActivityBody{ActivityID: a.GetActivityId(), Type: a.GetActivityType().GetName(),
		State:   strings.ToLower(strings.TrimPrefix(a.GetState().String(), "PENDING_ACTIVITY_STATE_")),
		Attempt: a.GetAttempt(), MaxAttempts: a.GetMaximumAttempts(), LastWorker: a.GetLastWorkerIdentity()}
	if f := a.GetLastFailure(); f != nil {
		// The operator's own diagnostics: the activity's error as its worker reported it.
		b.LastFailure = domain.Truncate(f.GetMessage(), 2000)
	}
	if t := a.GetScheduledTime(); t != nil && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_SCHEDULED && a.GetAttempt() > 1 {
		at := t.AsTime()
		b.NextAttemptAt = &at
	}
	return b
}

// retryWorkflow resets a workflow to its last completed workflow task: the run is replaced
// by a new one that replays to there and schedules what followed afresh (a failing activity
// at attempt 1, now), keeping the signals and updates it received since.
func (s *Server) retryWorkflow(c *gin.Context) error {
	id, err := s.workflowParam(c)
	if err != nil {
		return err
	}
	var req OpsRetryRequest
	if err := decodeOptionalJSON(c, &req); err != nil {
		return err
	}
	if req.Reason == "" {
		req.Reason = "jam ops retry"
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), opsTimeout)
	defer cancel()
	d, err := s.cfg.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return workflowError(id, err)
	}
	runID := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	last, err := s.lastWorkflowTask(ctx, id, runID)
	if err != nil {
		return err
	}
	if last == 0 {
		return &Error{Status: http.StatusConflict, Code: domain.CodeConflict,
			Message: "the workflow has not completed a workflow task yet: there is nothing to reset to"}
	}
	resp, err := s.cfg.Temporal.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 s.namespace(),
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Reason:                    req.Reason,
		WorkflowTaskFinishEventId: last,
		RequestId:                 uuid.NewString(),
	})
	if err != nil {
		return workflowError(id, err)
	}
	c.JSON(http.StatusOK, OpsActionBody{WorkflowID: id, RunID: resp.GetRunId(),
		Done: fmt.Sprintf("reset run %s to its workflow task completed at event %d; the new run schedules what followed now", runID, last),
		Temporal: fmt.Sprintf("temporal workflow reset --namespace %s --workflow-id %q --run-id %s --type LastWorkflowTask --reason %q",
			s.namespace(), id, runID, req.Reason)})
	return nil
}

// lastWorkflowTask is the event id of the run's last WorkflowTaskCompleted (0: none).
func (s *Server) lastWorkflowTask(ctx context.Context, id, runID string) (int64, error) {
	events, err := s.history(ctx, id, runID)
	if err != nil {
		return 0, err
	}
	var last int64
	for _, e := range events {
		if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			last = e.GetEventId()
		}
	}
	return last, nil
}

// history reads one run's events (a run is bounded by continue-as-new).
func (s *Server) history(ctx context.Context, id, runID string) ([]*historypb.HistoryEvent, error) {
	it := s.cfg.Temporal.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, workflowError(id, err)
		}
		events = append(events, e)
	}
	return events, nil
}

// pendingUpdates are the updates a history accepted and did not complete, oldest first.
func pendingUpdates(events []*historypb.HistoryEvent) []OpsUpdateBody {
	open := map[string]int{}
	out := []OpsUpdateBody{}
	for _, e := range events {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			req := e.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest()
			open[req.GetMeta().GetUpdateId()] = len(out)
			out = append(out, OpsUpdateBody{UpdateID: req.GetMeta().GetUpdateId(), Name: req.GetInput().GetName(),
				AcceptedAt: e.GetEventTime().AsTime()})
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
			if i, ok := open[e.GetWorkflowExecutionUpdateCompletedEventAttributes().GetMeta().GetUpdateId()]; ok {
				out[i].UpdateID = "" // completed
			}
		}
	}
	pending := out[:0]
	for _, u := range out {
		if u.UpdateID != "" {
			pending = append(pending, u)
		}
	}
	return pending
}

// terminateWorkflow ends a workflow. A RoomSession or RuntimeHost is an entity Jam expects
// to run: terminating one is refused without force, and the answer says what comes next.
func (s *Server) terminateWorkflow(c *gin.Context) error {
	id, err := s.workflowParam(c)
	if err != nil {
		return err
	}
	var req OpsTerminateRequest
	if err := decodeOptionalJSON(c, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Reason) == "" {
		return validationError(domain.Validations{{Field: "reason", Detail: "say why, for the workflow's history"}})
	}
	next := ""
	switch typ, _ := contract.ParseWorkflowType(id); typ {
	case contract.TypeRoomSession:
		next = "the room's next message, or Reconcile within its interval when messages wait, starts the session's workflow again from its records; a live runtime of the terminated run is reaped by its node"
	case contract.TypeRuntimeHost:
		next = "the host's next member acquire starts its workflow again from the host record; leases the terminated run held are lost, so stop and restart the host's rooms (jam host control HOST restart)"
	}
	if next != "" && !req.Force {
		return &Error{Status: http.StatusConflict, Code: domain.CodeConflict,
			Message: "refused: " + id + " is an entity workflow Jam keeps running; pass force to terminate it anyway (" + next + ")"}
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), opsTimeout)
	defer cancel()
	if err := s.cfg.Temporal.TerminateWorkflow(ctx, id, "", req.Reason); err != nil {
		return workflowError(id, err)
	}
	c.JSON(http.StatusOK, OpsActionBody{WorkflowID: id, Done: "terminated", Next: next,
		Temporal: fmt.Sprintf("temporal workflow terminate --namespace %s --workflow-id %q --reason %q", s.namespace(), id, req.Reason)})
	return nil
}

// signalInbound pokes a session's workflow as a new message would (it reads the room's
// queue; the database is the truth).
func (s *Server) signalInbound(c *gin.Context) error {
	h, err := lookup(c, "session", s.cfg.Store.GetHostSession)
	if err != nil {
		return err
	}
	id := contract.RoomSessionID(h.RuntimeSessionID)
	ctx, cancel := context.WithTimeout(c.Request.Context(), opsTimeout)
	defer cancel()
	err = s.cfg.Temporal.SignalWorkflow(ctx, id, "", contract.SignalInbound, nil)
	if contract.IsNotFound(err) && !h.Removed && s.cfg.Sessions != nil {
		// A bound room's workflow starts with its first message; the poke a lost first
		// message would have made starts it (SignalWithStart).
		err = s.cfg.Sessions.Poke(ctx, domain.Binding{RuntimeSessionID: h.RuntimeSessionID, AgentID: h.AgentID, RoomID: h.RoomID})
	}
	if err != nil {
		return workflowError(id, err)
	}
	c.JSON(http.StatusOK, OpsActionBody{WorkflowID: id, Done: "signalled " + contract.SignalInbound,
		Temporal: fmt.Sprintf("temporal workflow signal --namespace %s --workflow-id %q --name %s", s.namespace(), id, contract.SignalInbound)})
	return nil
}

// reconcileStatus shows the Reconcile schedule and its newest finished run's report.
func (s *Server) reconcileStatus(c *gin.Context) error {
	ctx, cancel := context.WithTimeout(c.Request.Context(), opsTimeout)
	defer cancel()
	out := OpsReconcileBody{ScheduleID: contract.ReconcileScheduleID,
		Temporal: fmt.Sprintf("temporal schedule describe --namespace %s --schedule-id %s", s.namespace(), contract.ReconcileScheduleID)}
	d, err := s.cfg.Temporal.ScheduleClient().GetHandle(ctx, contract.ReconcileScheduleID).Describe(ctx)
	if err != nil {
		return workflowError(contract.ReconcileScheduleID, err)
	}
	out.Paused = d.Schedule.State != nil && d.Schedule.State.Paused
	if sp := d.Schedule.Spec; sp != nil && len(sp.Intervals) == 1 {
		out.Interval = sp.Intervals[0].Every.String()
	}
	if len(d.Info.NextActionTimes) > 0 {
		next := d.Info.NextActionTimes[0]
		out.NextRunAt = &next
	}
	resp, err := s.cfg.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: 1,
		Query: fmt.Sprintf("%s = '%s' AND ExecutionStatus = 'Completed'", contract.SearchKind.GetName(), contract.TypeReconcile)})
	if err != nil {
		return temporalUnavailable(err)
	}
	if ex := resp.GetExecutions(); len(ex) > 0 {
		last := s.opsWorkflow(ex[0])
		out.LastRun = &last
		var rep contract.ReconcileReport
		if err := s.cfg.Temporal.GetWorkflow(ctx, last.WorkflowID, last.RunID).Get(ctx, &rep); err == nil {
			out.LastResult = &rep
		}
	}
	c.JSON(http.StatusOK, out)
	return nil
}

// opsWorkflow is a workflow's visibility record as the API shows it.
func (s *Server) opsWorkflow(e *workflowpb.WorkflowExecutionInfo) OpsWorkflowBody {
	b := OpsWorkflowBody{WorkflowID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(),
		Type:   e.GetType().GetName(),
		Status: strings.ToLower(strings.TrimPrefix(e.GetStatus().String(), "WORKFLOW_EXECUTION_STATUS_")),
		Tags:   map[string]string{}}
	if t := e.GetStartTime(); t != nil {
		b.StartedAt = t.AsTime()
	}
	if t := e.GetCloseTime(); t != nil {
		ct := t.AsTime()
		b.ClosedAt = &ct
	}
	for name, p := range e.GetSearchAttributes().GetIndexedFields() {
		if !strings.HasPrefix(name, "Jam") {
			continue
		}
		var v string
		if converter.GetDefaultDataConverter().FromPayload(p, &v) == nil {
			if name == contract.SearchStage.GetName() {
				b.Stage = v
			} else {
				b.Tags[name] = v
			}
		}
	}
	b.WorkflowURL = s.workflowURL(b.WorkflowID)
	return b
}

// workflowParam is the :workflow path parameter, a Jam workflow id.
func (s *Server) workflowParam(c *gin.Context) (string, error) {
	id := c.Param("workflow")
	if _, err := contract.ParseWorkflowType(id); err != nil {
		return "", validationError(domain.Validations{{Field: "workflow", Detail: "a Jam workflow id such as RoomSession:<uuid>"}})
	}
	return id, nil
}

func (s *Server) namespace() string {
	if s.cfg.Namespace == "" {
		return "default"
	}
	return s.cfg.Namespace
}

// workflowError maps a Temporal answer about one workflow: not found is 404, anything else
// the workflow service being unavailable.
func workflowError(id string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return notFound("workflow "+id, err)
	}
	return temporalUnavailable(err)
}

func temporalUnavailable(err error) error {
	var inv *serviceerror.InvalidArgument
	if errors.As(err, &inv) {
		return &Error{Status: http.StatusBadRequest, Code: domain.CodeValidation, Message: "Temporal refused the request", Cause: err}
	}
	return &Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable, Message: "the workflow service is unavailable", Cause: err}
}
