package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/store"
)

// roster is who is in the session's room now, as its runtime is told: its own name, the
// room's, and every other participant (humans by name, agents by theirs).
func roster(ctx context.Context, st *store.Store, hs domain.HostSession, self domain.Agent) (provider.Roster, error) {
	room, err := st.GetRoom(ctx, hs.RoomID)
	if err != nil {
		return provider.Roster{}, fmt.Errorf("roster of %s: %w", hs.RuntimeSessionID, err)
	}
	ps, err := st.ListParticipants(ctx, hs.RoomID)
	if err != nil {
		return provider.Roster{}, fmt.Errorf("roster of %s: %w", hs.RuntimeSessionID, err)
	}
	out := provider.Roster{AgentName: self.Name, RoomName: room.Name}
	for _, p := range ps { // the active participants
		switch {
		case p.Kind == domain.ParticipantHuman:
			out.Members = append(out.Members, provider.Member{Name: p.HumanName, Human: true, ID: p.ID})
		case p.AgentID != nil && *p.AgentID != self.ID:
			a, err := st.GetAgent(ctx, *p.AgentID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return provider.Roster{}, fmt.Errorf("roster of %s: %w", hs.RuntimeSessionID, err)
			}
			out.Members = append(out.Members, provider.Member{Name: a.Name, ID: p.ID})
		}
	}
	return out, nil
}
