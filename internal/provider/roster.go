package provider

import "github.com/google/uuid"

// Roster is who is in the room a runtime serves, rendered into its prompts.
type Roster struct {
	AgentName string
	RoomName  string
	Members   []Member
}

// Member is one room participant.
type Member struct {
	Name  string
	Human bool
	ID    uuid.UUID
}
