package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// RoomBody is a room with its active participants.
type RoomBody struct {
	ID           uuid.UUID         `json:"id"`
	Name         string            `json:"name"`
	CreatedAt    time.Time         `json:"created_at"`
	Participants []ParticipantBody `json:"participants,omitempty"`
}

// RoomList is the body of GET /v1/rooms.
type RoomList struct {
	Items []RoomBody `json:"items"`
}

// ParticipantBody is a human or an agent in a room. For an owned agent, Session says which
// runtime session the membership bound.
type ParticipantBody struct {
	ID        uuid.UUID              `json:"id"`
	RoomID    uuid.UUID              `json:"room_id"`
	Kind      domain.ParticipantKind `json:"kind"`
	AgentID   *uuid.UUID             `json:"agent_id,omitempty"`
	Human     string                 `json:"human,omitempty"`
	CreatedAt time.Time              `json:"created_at"`
	Session   *BoundSession          `json:"session,omitempty"`
}

// BoundSession is the runtime session a room membership bound.
type BoundSession struct {
	RuntimeSessionID uuid.UUID `json:"runtime_session_id"`
	BindingID        uuid.UUID `json:"binding_id"`
	Alias            string    `json:"alias"`
	// TemplateID and Transport say what the room runs.
	TemplateID uuid.UUID        `json:"template_id"`
	Transport  domain.Transport `json:"transport"`
	// Reused is true when re-adding the agent reactivated its earlier session.
	Reused bool `json:"reused"`
}

func participantBody(p domain.Participant) ParticipantBody {
	return ParticipantBody{ID: p.ID, RoomID: p.RoomID, Kind: p.Kind, AgentID: p.AgentID, Human: p.HumanName, CreatedAt: p.CreatedAt}
}

// CreateRoomRequest is the body of POST /v1/rooms.
type CreateRoomRequest struct {
	Name string `json:"name"`
}

func (r CreateRoomRequest) Validate() error {
	return domain.ValidateName("name", r.Name, domain.MaxNameLen)
}

// AddParticipantRequest is the body of POST /v1/rooms/{id}/participants: exactly one of
// agent_id and human. An owned agent's room runs the template named by template_id or
// alias (at most one; neither: the agent's first template).
type AddParticipantRequest struct {
	AgentID    *string `json:"agent_id"`
	Human      *string `json:"human"`
	TemplateID *string `json:"template_id,omitempty"`
	Alias      *string `json:"alias,omitempty"`
}

func (r AddParticipantRequest) Validate() error {
	switch {
	case (r.AgentID == nil) == (r.Human == nil):
		return &domain.ValidationError{Field: "agent_id", Detail: "give exactly one of agent_id and human"}
	case r.AgentID != nil:
		if _, err := domain.ParseID("agent_id", *r.AgentID); err != nil {
			return err
		}
		if r.TemplateID != nil && r.Alias != nil {
			return &domain.ValidationError{Field: "template_id", Detail: "give at most one of template_id and alias"}
		}
		if r.TemplateID != nil {
			_, err := domain.ParseID("template_id", *r.TemplateID)
			return err
		}
		if r.Alias != nil {
			return domain.ValidateAlias("alias", *r.Alias)
		}
		return nil
	default:
		if r.TemplateID != nil || r.Alias != nil {
			return &domain.ValidationError{Field: "template_id", Detail: "a human runs no template"}
		}
		return domain.ValidateName("human", *r.Human, domain.MaxHumanNameBytes)
	}
}

// pick is the template the request names for an owned agent's binding.
func (r AddParticipantRequest) pick() store.TemplatePick {
	var p store.TemplatePick
	if r.TemplateID != nil {
		p.ID, _ = domain.ParseID("template_id", *r.TemplateID)
	}
	if r.Alias != nil {
		p.Alias = *r.Alias
	}
	return p
}

// PostMessageRequest is the body of POST /v1/rooms/{id}/messages.
type PostMessageRequest struct {
	Text string `json:"text"`
	// Author is the human the operator posts as; agents post as themselves and omit it.
	Author string `json:"author,omitempty"`
}

func (r PostMessageRequest) Validate() error {
	var v domain.Validations
	if err := domain.ValidateMessageText(r.Text); err != nil {
		v.AddErr("text", err)
	}
	if r.Author != "" {
		if err := domain.ValidateName("author", r.Author, domain.MaxHumanNameBytes); err != nil {
			v.AddErr("author", err)
		}
	}
	return v.Err()
}

// MessageBody is one transcript entry.
type MessageBody struct {
	ID            uuid.UUID              `json:"id"`
	Seq           int64                  `json:"seq"`
	RoomID        uuid.UUID              `json:"room_id"`
	AuthorKind    domain.ParticipantKind `json:"author_kind"`
	AuthorAgentID *uuid.UUID             `json:"author_agent_id,omitempty"`
	// AuthorAgentName is the authoring agent's name (absent once the agent is deleted).
	AuthorAgentName string     `json:"author_agent_name,omitempty"`
	AuthorHuman     string     `json:"author_human,omitempty"`
	Text            string     `json:"text"`
	ReplyTo         *uuid.UUID `json:"reply_to,omitempty"`
	// A long agent reply is posted as ordered parts: Part of Parts (from 1; absent for a
	// message that is whole), each after the first continuing the part before it.
	Continues *uuid.UUID `json:"continues,omitempty"`
	Part      int        `json:"part,omitempty"`
	Parts     int        `json:"parts,omitempty"`
	// AgentHops counts the agent messages in this one's chain since the last human message;
	// past the room's limit (setting rooms.max_agent_hops) a message wakes no agent.
	AgentHops int       `json:"agent_hops"`
	CreatedAt time.Time `json:"created_at"`
}

// MessageList is a page of a transcript; NextCursor is the `after` of the next page, empty
// at the end.
type MessageList struct {
	Items      []MessageBody `json:"items"`
	NextCursor string        `json:"next_cursor"`
}

func messageBody(m domain.Message) MessageBody {
	return MessageBody{ID: m.ID, Seq: m.Seq, RoomID: m.RoomID, AuthorKind: m.AuthorKind, AuthorAgentID: m.AuthorAgentID,
		AuthorHuman: m.AuthorHuman, Text: m.Text, ReplyTo: m.ReplyTo, Continues: m.Continues, Part: m.Part, Parts: m.Parts,
		AgentHops: m.AgentHops, CreatedAt: m.CreatedAt}
}

// authorNames resolves the names of authoring agents for one request, each agent once.
type authorNames struct {
	store *store.Store
	names map[uuid.UUID]string
}

// authorNames starts a resolver that already knows the given agents.
func (s *Server) authorNames(known ...domain.Agent) *authorNames {
	n := &authorNames{store: s.cfg.Store, names: map[uuid.UUID]string{}}
	for _, a := range known {
		n.names[a.ID] = a.Name
	}
	return n
}

// body is messageBody with the authoring agent's name; an agent deleted since has none.
func (n *authorNames) body(ctx context.Context, m domain.Message) (MessageBody, error) {
	b := messageBody(m)
	if m.AuthorAgentID == nil {
		return b, nil
	}
	name, ok := n.names[*m.AuthorAgentID]
	if !ok {
		a, err := n.store.GetAgent(ctx, *m.AuthorAgentID)
		switch {
		case err == nil:
			name = a.Name
		case !errors.Is(err, store.ErrNotFound):
			return MessageBody{}, fmt.Errorf("name the author of message %s: %w", m.ID, err)
		}
		n.names[*m.AuthorAgentID] = name
	}
	b.AuthorAgentName = name
	return b, nil
}

// Transcript paging bounds.
const (
	defaultPage = 100
	maxPage     = 500
)

func (s *Server) roomParam(c *gin.Context) (domain.Room, error) {
	return lookup(c, "room", s.cfg.Band.Room)
}

func (s *Server) createRoom(c *gin.Context) error {
	var req CreateRoomRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	r, err := s.cfg.Band.CreateRoom(c.Request.Context(), req.Name)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, RoomBody{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt})
	return nil
}

func (s *Server) listRooms(c *gin.Context) error {
	rooms, err := s.cfg.Band.Rooms(c.Request.Context())
	if err != nil {
		return err
	}
	out := RoomList{Items: make([]RoomBody, len(rooms))}
	for i, r := range rooms {
		out.Items[i] = RoomBody{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt}
	}
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) getRoom(c *gin.Context) error {
	r, err := s.roomParam(c)
	if err != nil {
		return err
	}
	ps, err := s.cfg.Band.Participants(c.Request.Context(), r.ID)
	if err != nil {
		return err
	}
	body := RoomBody{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt, Participants: make([]ParticipantBody, len(ps))}
	for i, p := range ps {
		body.Participants[i] = participantBody(p)
	}
	c.JSON(http.StatusOK, body)
	return nil
}

// addParticipant is room_added. For an owned agent the same call binds the room to a
// runtime session (materialized from its template, or the tombstone of an earlier membership).
func (s *Server) addParticipant(c *gin.Context) error {
	r, err := s.roomParam(c)
	if err != nil {
		return err
	}
	var req AddParticipantRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Human != nil {
		p, err := s.cfg.Band.AddHuman(c.Request.Context(), r.ID, *req.Human)
		if errors.Is(err, store.ErrConflict) {
			return &Error{Status: http.StatusConflict, Code: domain.CodeConflict, Message: "this human is already in the room", Cause: err}
		}
		if err != nil {
			return err
		}
		c.JSON(http.StatusCreated, participantBody(p))
		return nil
	}
	agentID, _ := domain.ParseID("agent_id", *req.AgentID)
	if _, err := s.cfg.Store.GetAgent(c.Request.Context(), agentID); errors.Is(err, store.ErrNotFound) {
		return notFound("agent", err)
	} else if err != nil {
		return err
	}
	m, err := s.cfg.Band.AddAgent(c.Request.Context(), r.ID, agentID, req.pick())
	if errors.Is(err, store.ErrConflict) {
		return &Error{Status: http.StatusConflict, Code: domain.CodeConflict, Message: "this agent is already in the room", Cause: err}
	}
	if err != nil {
		return err
	}
	body := participantBody(m.Participant)
	if m.Binding != nil && m.Session != nil {
		body.Session = &BoundSession{RuntimeSessionID: m.Binding.RuntimeSessionID, BindingID: m.Binding.ID,
			Alias: m.Session.Alias, TemplateID: m.Session.TemplateID, Transport: m.Session.Config.Transport, Reused: m.Reused}
	}
	c.JSON(http.StatusCreated, body)
	return nil
}

// removeParticipant is room_removed; an owned agent's binding becomes a tombstone.
func (s *Server) removeParticipant(c *gin.Context) error {
	r, err := s.roomParam(c)
	if err != nil {
		return err
	}
	pid, err := uuidParam(c, "participant_id")
	if err != nil {
		return err
	}
	if _, err := s.cfg.Band.RemoveParticipant(c.Request.Context(), r.ID, pid); errors.Is(err, store.ErrNotFound) {
		return notFound("participant", err)
	} else if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// postMessage posts as a human with the operator token, or as itself with an agent's key.
func (s *Server) postMessage(c *gin.Context) error {
	r, err := s.roomParam(c)
	if err != nil {
		return err
	}
	var req PostMessageRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	m := domain.Message{RoomID: r.ID, Text: req.Text}
	names := s.authorNames()
	if p := principalOf(c); p.agent != nil {
		names = s.authorNames(*p.agent)
		if req.Author != "" {
			return validationError(domain.Validations{{Field: "author", Detail: "an agent posts as itself; omit author"}})
		}
		m.AuthorKind, m.AuthorAgentID = domain.ParticipantAgent, &p.agent.ID
	} else {
		m.AuthorKind, m.AuthorHuman = domain.ParticipantHuman, req.Author
		if m.AuthorHuman == "" {
			if m.AuthorHuman, err = s.soleHuman(c, r.ID); err != nil {
				return err
			}
		}
	}
	posted, err := s.cfg.Band.Post(c.Request.Context(), m)
	if err != nil {
		return err
	}
	body, err := names.body(c.Request.Context(), posted)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, body)
	return nil
}

// soleHuman is the author an operator's post defaults to: the room's only human.
func (s *Server) soleHuman(c *gin.Context, room uuid.UUID) (string, error) {
	ps, err := s.cfg.Band.Participants(c.Request.Context(), room)
	if err != nil {
		return "", err
	}
	var humans []string
	for _, p := range ps {
		if p.Kind == domain.ParticipantHuman {
			humans = append(humans, p.HumanName)
		}
	}
	if len(humans) != 1 {
		return "", validationError(domain.Validations{{Field: "author",
			Detail: "required unless the room has exactly one human participant"}})
	}
	return humans[0], nil
}

func (s *Server) listMessages(c *gin.Context) error {
	r, err := s.roomParam(c)
	if err != nil {
		return err
	}
	var v domain.Validations
	after := int64(0)
	if a := c.Query("after"); a != "" {
		if after, err = strconv.ParseInt(a, 10, 64); err != nil || after < 0 {
			v.Add("after", "must be a cursor from next_cursor (a non-negative integer)")
		}
	}
	limit := defaultPage
	if l := c.Query("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > maxPage {
			v.Add("limit", "must be between 1 and "+strconv.Itoa(maxPage))
		}
	}
	if err := v.Err(); err != nil {
		return err
	}
	msgs, err := s.cfg.Band.Messages(c.Request.Context(), r.ID, after, limit)
	if err != nil {
		return err
	}
	out := MessageList{Items: make([]MessageBody, len(msgs))}
	names := s.authorNames()
	for i, m := range msgs {
		if out.Items[i], err = names.body(c.Request.Context(), m); err != nil {
			return err
		}
	}
	if len(msgs) == limit {
		out.NextCursor = strconv.FormatInt(msgs[len(msgs)-1].Seq, 10)
	}
	c.JSON(http.StatusOK, out)
	return nil
}
