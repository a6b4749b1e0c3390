package provider

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// Roster is who is in the room a runtime serves, rendered into its prompts: the agent's own
// name, the room's, and its other participants.
type Roster struct {
	AgentName string
	RoomName  string
	Members   []Member
}

// Member is one room participant.
type Member struct {
	Name  string
	Human bool
	// ID is the participant id (what jam_ask_question's recipient_id takes).
	ID uuid.UUID
}

func (m Member) String() string {
	kind := "agent"
	if m.Human {
		kind = "human"
	}
	return fmt.Sprintf("%s (%s)", displayName(m.Name), kind)
}

// RosterChanges says how the room's membership changed from before to after, for the turn
// that starts with after ("" when it did not): who joined and who left, by name.
func RosterChanges(before, after Roster) string {
	had := func(r Roster, m Member) bool {
		return slices.ContainsFunc(r.Members, func(o Member) bool { return o.ID == m.ID })
	}
	var joined, left []string
	for _, m := range after.Members {
		if !had(before, m) {
			joined = append(joined, m.String())
		}
	}
	for _, m := range before.Members {
		if !had(after, m) {
			left = append(left, m.String())
		}
	}
	var parts []string
	if len(joined) > 0 {
		parts = append(parts, "joined: "+strings.Join(joined, ", "))
	}
	if len(left) > 0 {
		parts = append(parts, "left: "+strings.Join(left, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return "[room membership changed since your last turn] " + strings.Join(parts, "; ") + "."
}

// RosterTracker is what a runtime instance has been told of its room: the roster it started
// with, then each turn's. Every adapter keeps one, so the membership difference reaches the
// provider at the turn that first sees it, whatever its instruction channel.
type RosterTracker struct {
	mu  sync.Mutex
	cur Roster
}

// NewRosterTracker starts from the roster the runtime was prepared with.
func NewRosterTracker(r Roster) *RosterTracker { return &RosterTracker{cur: r} }

// Current is the roster the runtime knows now.
func (t *RosterTracker) Current() Roster {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

// Advance records the roster a turn starts with (nil: the caller does not know it; nothing
// changes) and returns what changed since the last one, for the turn's envelope.
func (t *RosterTracker) Advance(next *Roster) string {
	if next == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	changes := RosterChanges(t.cur, *next)
	t.cur = *next
	return changes
}
