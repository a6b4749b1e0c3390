package provider

import (
	"context"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// PermissionRequest is a provider's request to run a tool, translated from its native shape.
type PermissionRequest struct {
	AgentID        uuid.UUID
	RoomID         uuid.UUID
	RuntimeSession uuid.UUID
	// ToolKey groups requests for always-rules (the ACP tool kind, e.g. "edit", "execute").
	ToolKey string
	Title   string
	Summary string
}

// PermissionAnswer is the broker's answer.
type PermissionAnswer struct {
	// ID is the stored request's id (uuid.Nil when no request was recorded).
	ID       uuid.UUID
	Decision domain.PermissionDecision
	Reason   string
}

// PermissionBroker decides runtime permission requests: a durable always-rule, else a pending
// request an operator or a human in the room decides. It blocks until decided, the deadline
// passes (deny) or ctx ends.
type PermissionBroker interface {
	Request(ctx context.Context, req PermissionRequest) (PermissionAnswer, error)
}

// NoBrokerReason is the reason given when a runtime asks with no broker configured.
const NoBrokerReason = "no runtime permission broker configured"

// AskPermission asks the spec's broker, or denies once when there is none. What the request
// says (its title and summary: raw tool input) is redacted first, so no secret reaches the
// broker's record, the event stream or the room.
func (s Spec) AskPermission(ctx context.Context, req PermissionRequest) (PermissionAnswer, error) {
	req.Title, req.Summary = s.Redactor.Redact(req.Title), s.Redactor.Redact(req.Summary)
	if s.Permissions == nil {
		return PermissionAnswer{Decision: domain.PermissionDeny, Reason: NoBrokerReason}, nil
	}
	return s.Permissions.Request(ctx, req)
}
