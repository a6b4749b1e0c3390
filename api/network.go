package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// NetworkRuleBody is one entry of a sandbox's network journal.
type NetworkRuleBody struct {
	Target          string                  `json:"target"`
	State           domain.NetworkRuleState `json:"state"`
	RuleID          string                  `json:"rule_id,omitempty"`
	BaselineRuleIDs []string                `json:"baseline_rule_ids,omitempty"`
}

// NetworkCheckBody is what the readiness check found for one target.
type NetworkCheckBody struct {
	Target string                  `json:"target"`
	Result domain.NetworkReadiness `json:"result"`
}

// HostNetworkBody is the body of GET /v1/hosts/{id}/network.
type HostNetworkBody struct {
	Host       uuid.UUID          `json:"host"`
	Sandbox    string             `json:"sandbox"`
	Entries    []NetworkRuleBody  `json:"entries"`
	Readiness  []NetworkCheckBody `json:"readiness"`
	WorkflowID string             `json:"workflow_id"`
}

// hostNetwork asks the host's node for its sandbox's network journal (what Jam owns, what
// others cover, what is pending) and a bounded read-only readiness check of every target.
func (s *Server) hostNetwork(c *gin.Context) error {
	h, err := lookup(c, "runtime host", s.cfg.Store.GetRuntimeHost)
	if err != nil {
		return err
	}
	if !h.Sandboxed {
		return domain.Refuse("runtime host %s has no sandbox", h.ID)
	}
	var out contract.NetworkReport
	run, err := s.askNodeWith(c, h.Node, contract.HostNetworkID(h.ID), contract.HostNetworkTimeout,
		contract.TypeHostNetwork, contract.HostProbeInput{Node: h.Node, Host: h.ID}, &out)
	if err != nil {
		return err
	}
	body := HostNetworkBody{Host: h.ID, Sandbox: out.Sandbox, Entries: make([]NetworkRuleBody, len(out.Entries)),
		Readiness: make([]NetworkCheckBody, len(out.Readiness)), WorkflowID: run.GetID()}
	for i, e := range out.Entries {
		body.Entries[i] = NetworkRuleBody{Target: e.Target, State: e.State, RuleID: e.RuleID, BaselineRuleIDs: e.BaselineRuleIDs}
	}
	for i, r := range out.Readiness {
		body.Readiness[i] = NetworkCheckBody{Target: r.Target, Result: r.Result}
	}
	c.JSON(http.StatusOK, body)
	return nil
}
