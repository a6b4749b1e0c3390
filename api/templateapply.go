package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// renderTemplateApply reports an apply's outcome honestly: the TemplateApply workflow
// finishes once every room was asked, but a room whose candidate runtime failed keeps its
// old configuration (recorded on the session as a failed pending change), so the operation
// succeeds only when every room and host took the generation. Otherwise it fails, naming
// each room that did not and why (issue 44: the CLI reported success over a failed session).
func (s *Server) renderTemplateApply(op domain.Operation) resultRenderer {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var out contract.TemplateApplyResult
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("decode the result of template apply %s: %w", op.WorkflowID, err)
		}
		_, gen, err := contract.ParseTemplateApplyID(op.WorkflowID)
		if err != nil {
			return nil, err
		}
		var failed []string
		for i, one := range out.Sessions {
			if one.Error == "" {
				hs, err := s.cfg.Store.GetHostSession(ctx, one.ID)
				if err != nil {
					return nil, err
				}
				if pc := hs.PendingChange; pc != nil && pc.Status == domain.PendingFailed && pc.Generation == gen {
					one.Error = pc.Reason
					out.Sessions[i] = one
				}
			}
			if one.Error != "" {
				failed = append(failed, fmt.Sprintf("runtime session %s: %s", one.ID, domain.Truncate(one.Error, 500)))
			}
		}
		for _, one := range out.Hosts {
			if one.Error != "" {
				failed = append(failed, fmt.Sprintf("runtime host %s: %s", one.ID, domain.Truncate(one.Error, 500)))
			}
		}
		if len(failed) == 0 {
			return out, nil
		}
		return nil, &Error{Status: http.StatusUnprocessableEntity, Code: domain.CodePrecondition,
			Message: fmt.Sprintf("%d of %d rooms and hosts did not take generation %d (they keep their previous configuration; jam session show ID says why): %s",
				len(failed), len(out.Sessions)+len(out.Hosts), gen, strings.Join(failed, "; "))}
	}
}
