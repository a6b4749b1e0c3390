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
// succeeds only when every room took the generation (its effective generation reached it)
// and every host to recreate was. Otherwise it fails, naming each room or host that did
// not and why (issue 44: the CLI reported success over a failed session). A newer save
// supersedes the generation: what it did not reach then is the newer apply's to report.
func (s *Server) renderTemplateApply(op domain.Operation) resultRenderer {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var out contract.TemplateApplyResult
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("decode the result of template apply %s: %w", op.WorkflowID, err)
		}
		template, gen, err := contract.ParseTemplateApplyID(op.WorkflowID)
		if err != nil {
			return nil, err
		}
		t, err := s.cfg.Store.GetTemplate(ctx, template)
		if err != nil {
			return nil, err
		}
		if out.Superseded || t.DesiredGeneration > gen {
			return out, nil
		}
		var failed []string
		for i, one := range out.Sessions {
			hs, err := s.cfg.Store.GetHostSession(ctx, one.ID)
			if err != nil {
				return nil, err
			}
			if hs.EffectiveGeneration >= gen {
				continue
			}
			// Why, in words the session API shows too (never an activity's raw error).
			why := "it keeps its previous configuration"
			if pc := hs.PendingChange; pc != nil && pc.Status == domain.PendingFailed && pc.Generation == gen && pc.Reason != "" {
				why = pc.Reason
			}
			out.Sessions[i].Error = why
			failed = append(failed, fmt.Sprintf("runtime session %s: %s", one.ID, domain.Truncate(why, 500)))
		}
		for i, one := range out.Hosts {
			if one.Replaced {
				continue
			}
			out.Hosts[i].Error = "the runtime host was not recreated; its rooms keep their previous configuration"
			failed = append(failed, fmt.Sprintf("runtime host %s: %s", one.ID, out.Hosts[i].Error))
		}
		if len(failed) == 0 {
			return out, nil
		}
		return nil, &Error{Status: http.StatusUnprocessableEntity, Code: domain.CodePrecondition,
			Message: fmt.Sprintf("%d of %d rooms and hosts did not take generation %d (jam session show ID says why): %s",
				len(failed), len(out.Sessions)+len(out.Hosts), gen, strings.Join(failed, "; "))}
	}
}
