package activities

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// FindResetInput names a source host.
type FindResetInput struct {
	Host uuid.UUID `json:"host"`
}

// FindResetResult is the persisted reset of a host, if any.
type FindResetResult struct {
	Found bool                   `json:"found"`
	Reset domain.ContinuityReset `json:"reset"`
}

// FindReset reads the host's persisted continuity reset: a replay continues it instead of
// inspecting again.
func (h *Hosts) FindReset(ctx context.Context, in FindResetInput) (FindResetResult, error) {
	r, err := h.Store.GetContinuityReset(ctx, in.Host)
	if errors.Is(err, store.ErrNotFound) {
		return FindResetResult{}, nil
	}
	if err != nil {
		return FindResetResult{}, err
	}
	return FindResetResult{Found: true, Reset: r}, nil
}

// PrepareResetInput persists a reset under its workflow-minted id.
type PrepareResetInput struct {
	ID               uuid.UUID `json:"id"`
	Host             uuid.UUID `json:"host"`
	EvidenceChecksum string    `json:"evidence_checksum"`
}

// PrepareReset writes the immutable reset record (first, before anything changes).
func (h *Hosts) PrepareReset(ctx context.Context, in PrepareResetInput) (domain.ContinuityReset, error) {
	return h.Store.PrepareContinuityReset(ctx, in.ID, in.Host, in.EvidenceChecksum, time.Now())
}

// ApplyResetInput carries the persisted record.
type ApplyResetInput struct {
	Reset domain.ContinuityReset `json:"reset"`
}

// ApplyReset moves every room to its replacement session and archives the source, in one
// transaction (idempotent: a replay after the final write changes nothing).
func (h *Hosts) ApplyReset(ctx context.Context, in ApplyResetInput) error {
	return h.Store.ApplyContinuityReset(ctx, in.Reset, time.Now())
}

// MemberInput names one member session (or its replacement binding).
type MemberInput struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	AgentID        uuid.UUID `json:"agent_id,omitempty"`
	RoomID         uuid.UUID `json:"room_id,omitempty"`
	BindingID      uuid.UUID `json:"binding_id,omitempty"`
}

// RetireMember ends a replaced session's workflow (its runtime is already stopped).
func (h *Hosts) RetireMember(ctx context.Context, in MemberInput) error {
	return typed(h.Members.RetireMember(ctx, updateID(ctx), in.RuntimeSession))
}

// WakeMember starts (or pokes) a replacement session's workflow: rooms with queued messages
// answer from the fresh session.
func (h *Hosts) WakeMember(ctx context.Context, in MemberInput) error {
	return h.Members.Wake(ctx, domain.Binding{ID: in.BindingID, AgentID: in.AgentID, RoomID: in.RoomID,
		RuntimeSessionID: in.RuntimeSession, Active: true})
}
