package main

import (
	"encoding/json"
	"net/http"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
)

// authorNamer names the authors of messages for people: a human by name, an agent by the
// name the API sent with the message, else (event payloads carry only the id) by the agents
// list, read once per command and again only when an agent it does not know appears (one
// created while `room tail` runs). An agent it still cannot name (deleted, or a list the
// credentials may not read) is shown by id.
type authorNamer struct {
	list  func() ([]api.AgentBody, error)
	names map[uuid.UUID]string
	asked map[uuid.UUID]bool
}

func newAuthorNamer(cf *clientFlags, cmd *cobra.Command) *authorNamer {
	return &authorNamer{
		list: func() ([]api.AgentBody, error) {
			raw, err := cf.call(cmd, http.MethodGet, "/v1/agents", nil)
			if err != nil {
				return nil, err
			}
			var out api.AgentList
			err = json.Unmarshal(raw, &out)
			return out.Items, err
		},
		names: map[uuid.UUID]string{},
		asked: map[uuid.UUID]bool{},
	}
}

func (n *authorNamer) name(m api.MessageBody) string {
	if m.AuthorKind != domain.ParticipantAgent || m.AuthorAgentID == nil {
		return m.AuthorHuman
	}
	id := *m.AuthorAgentID
	if m.AuthorAgentName != "" {
		n.names[id] = m.AuthorAgentName
		return m.AuthorAgentName
	}
	return n.agentName(id)
}

// agentName names an agent by id from the agents list.
func (n *authorNamer) agentName(id uuid.UUID) string {
	if name, ok := n.names[id]; ok {
		return name
	}
	if !n.asked[id] {
		n.asked[id] = true
		if agents, err := n.list(); err == nil {
			for _, a := range agents {
				n.names[a.ID] = a.Name
			}
		}
		if name, ok := n.names[id]; ok {
			return name
		}
	}
	return "agent " + id.String()
}
