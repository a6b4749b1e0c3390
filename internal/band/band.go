package band

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/lifecycle"
	"github.com/jam-dev/jam/internal/store"
)

// Band is what the API needs of rooms, messages and the inbound queue.
type Band interface {
	CreateRoom(ctx context.Context, name string) (domain.Room, error)
	Room(ctx context.Context, id uuid.UUID) (domain.Room, error)
	Rooms(ctx context.Context) ([]domain.Room, error)
	Participants(ctx context.Context, room uuid.UUID) ([]domain.Participant, error)
	// AddAgent is room_added: for an owned agent it also binds the room, to a runtime
	// session made from the template pick names (zero: the agent's first), and starts it.
	AddAgent(ctx context.Context, room, agent uuid.UUID, pick store.TemplatePick) (store.Membership, error)
	AddHuman(ctx context.Context, room uuid.UUID, name string) (domain.Participant, error)
	// RemoveParticipant is room_removed: an owned agent's binding becomes a tombstone.
	RemoveParticipant(ctx context.Context, room, participant uuid.UUID) (store.Membership, error)
	Post(ctx context.Context, m domain.Message) (domain.Message, error)
	// AnswerQuestion answers a pending question outside the room (an operator). A question
	// whose asking call returned deferred is answered by a room message of its recipient
	// ("CODE text"), the asking agent's next turn.
	AnswerQuestion(ctx context.Context, id uuid.UUID, text, by string) (domain.Question, error)
	Messages(ctx context.Context, room uuid.UUID, after int64, limit int) ([]domain.Message, error)
	// Receive waits up to wait for the agent's next message on lease (nil when none came).
	Receive(ctx context.Context, agent uuid.UUID, lease uuid.UUID, wait time.Duration) (*store.Claim, error)
	Settle(ctx context.Context, agent, message uuid.UUID, how domain.Settlement, text string) (domain.Inbound, *domain.Message, error)
	Subscribe(f store.EventFilter, buf int) *Subscription
}

// Local is the Band kept in Jam's own store.
type Local struct {
	store     *store.Store
	hub       *Hub
	lifecycle lifecycle.Starter
	log       *slog.Logger
	now       func() time.Time
}

var _ Band = (*Local)(nil)

// NewLocal builds the local Band; Start it for subscriptions and receives to wake on new
// events.
func NewLocal(st *store.Store, starter lifecycle.Starter, log *slog.Logger) *Local {
	return &Local{store: st, hub: NewHub(st, log), lifecycle: starter, log: log, now: time.Now}
}

// Start tails the event log in the background until ctx ends.
func (l *Local) Start(ctx context.Context) error { return l.hub.Start(ctx) }

// Hub is the event fan-out.
func (l *Local) Hub() *Hub { return l.hub }

func (l *Local) CreateRoom(ctx context.Context, name string) (domain.Room, error) {
	return l.store.CreateRoom(ctx, domain.Room{ID: uuid.New(), Name: name, CreatedAt: l.now()})
}

func (l *Local) Room(ctx context.Context, id uuid.UUID) (domain.Room, error) {
	return l.store.GetRoom(ctx, id)
}

func (l *Local) Rooms(ctx context.Context) ([]domain.Room, error) { return l.store.ListRooms(ctx) }

func (l *Local) Participants(ctx context.Context, room uuid.UUID) ([]domain.Participant, error) {
	return l.store.ListParticipants(ctx, room)
}

func (l *Local) AddAgent(ctx context.Context, room, agent uuid.UUID, pick store.TemplatePick) (store.Membership, error) {
	m, err := l.store.AddAgentToRoomWith(ctx, room, agent, pick, l.now())
	if err != nil {
		return m, err
	}
	l.notifyBound(ctx, m)
	return m, nil
}

// notifyBound tells the lifecycle about a binding after it is durable. A failure here does
// not undo the membership: BindUnbound and the reconciler heal a runtime that did not start.
func (l *Local) notifyBound(ctx context.Context, m store.Membership) {
	if m.Binding == nil || !m.Binding.Active {
		return
	}
	if err := l.lifecycle.RoomBound(ctx, *m.Binding, m.Fresh); err != nil {
		l.log.Warn("runtime start after binding failed; it will be retried", "room", m.Binding.RoomID,
			"runtime_session", m.Binding.RuntimeSessionID, "error", err)
	}
}

func (l *Local) AddHuman(ctx context.Context, room uuid.UUID, name string) (domain.Participant, error) {
	return l.store.AddHumanToRoom(ctx, room, name, l.now())
}

func (l *Local) RemoveParticipant(ctx context.Context, room, participant uuid.UUID) (store.Membership, error) {
	m, err := l.store.RemoveParticipant(ctx, room, participant, l.now())
	if err != nil {
		return m, err
	}
	if m.Binding != nil {
		if err := l.lifecycle.RoomUnbound(ctx, *m.Binding); err != nil {
			l.log.Warn("runtime stop after unbinding failed; it will be retried", "room", room,
				"runtime_session", m.Binding.RuntimeSessionID, "error", err)
		}
	}
	return m, nil
}

// BindUnbound binds every owned-agent membership that has no active binding and tells the
// lifecycle: the level-triggered half of binding, run when Jam starts.
func (l *Local) BindUnbound(ctx context.Context) error {
	ps, err := l.store.UnboundMemberships(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		m, err := l.store.BindMembership(ctx, p.RoomID, *p.AgentID, l.now())
		if err != nil {
			// One agent without a template must not keep the others unbound.
			l.log.Warn("cannot bind room membership", "room", p.RoomID, "agent", *p.AgentID, "error", err)
			continue
		}
		l.notifyBound(ctx, m)
	}
	return nil
}

// Post appends a message to the room. A human's message that answers a pending question
// asked of them in the room (a reply to the question, or its code: "Q7K2 yes") answers it;
// a human's "approve <id>" or "deny <id>" that names a pending permission request of the
// same room (by a unique id prefix) decides it. Either is acknowledged for every agent
// instead of delivered as a turn; one that matches nothing is an ordinary message.
func (l *Local) Post(ctx context.Context, m domain.Message) (domain.Message, error) {
	m.ID, m.CreatedAt = uuid.New(), l.now()
	if m.AuthorKind == domain.ParticipantHuman {
		if posted, ok, err := l.postQuestionAnswer(ctx, m); err != nil || ok {
			return posted, err
		}
		if decision, prefix, ok := domain.ParsePermissionReply(m.Text); ok {
			posted, p, err := l.store.PostPermissionReply(ctx, m, prefix, decision, HumanDecider(m.AuthorHuman))
			var ambiguous *store.AmbiguousPrefixError
			switch {
			case err == nil:
				l.log.Info("permission decided in the room", "permission", p.ID, "room", m.RoomID,
					"decision", p.Decision, "by", p.DecidedBy)
				return posted, nil
			case errors.As(err, &ambiguous):
				l.log.Warn("permission reply names more than one pending request; posted as a message", "room", m.RoomID, "prefix", prefix)
			case !errors.Is(err, store.ErrNoPendingPermission):
				return domain.Message{}, err
			}
		}
	}
	posted, err := l.store.PostMessage(ctx, m)
	if err != nil {
		return posted, err
	}
	l.notifyInbound(ctx, posted)
	return posted, nil
}

// postQuestionAnswer posts m as the answer to the pending question it correlates to, if
// any (ok false: none, post it as usual). Only the first correlated reply answers: the
// question is no longer pending for the next.
func (l *Local) postQuestionAnswer(ctx context.Context, m domain.Message) (domain.Message, bool, error) {
	q, err := l.store.FindQuestionForReply(ctx, m)
	if errors.Is(err, store.ErrNoPendingQuestion) {
		return domain.Message{}, false, nil
	}
	if err != nil {
		return domain.Message{}, false, err
	}
	posted, q, err := l.store.PostQuestionAnswer(ctx, m, q, HumanDecider(m.AuthorHuman))
	switch {
	case errors.Is(err, store.ErrNoPendingQuestion):
		// Answered or expired since it was found: an ordinary message.
		return domain.Message{}, false, nil
	case err != nil:
		return domain.Message{}, false, err
	}
	l.log.Info("question answered in the room", "question", q.ID, "room", m.RoomID, "by", q.AnsweredBy)
	if q.DeferredAt != nil {
		// Nobody waits on the tool call any more: the answer is the asking agent's turn.
		l.notifyInbound(ctx, posted)
	}
	return posted, true, nil
}

// AnswerQuestion: see Band. An overdue question is expired by the answer and refused
// (store.ErrQuestionSettled), as store.AnswerQuestion does.
func (l *Local) AnswerQuestion(ctx context.Context, id uuid.UUID, text, by string) (domain.Question, error) {
	q, err := l.store.GetQuestion(ctx, id)
	if err != nil {
		return q, err
	}
	if q.DeferredAt == nil || q.State != domain.QuestionPending {
		return l.store.AnswerQuestion(ctx, id, text, by, nil, l.now())
	}
	m := domain.Message{ID: uuid.New(), RoomID: q.RoomID, AuthorKind: domain.ParticipantHuman, AuthorHuman: q.Recipient,
		Text: q.Code + " " + text, ReplyTo: q.MessageID, CreatedAt: l.now()}
	posted, answered, err := l.store.PostQuestionAnswer(ctx, m, q, by)
	if errors.Is(err, store.ErrNoPendingQuestion) {
		// Answered meanwhile, or overdue: the store says which (expiring an overdue one), as
		// for any settled question.
		return l.store.AnswerQuestion(ctx, id, text, by, nil, l.now())
	}
	if err != nil {
		return q, err
	}
	l.log.Info("deferred question answered for its recipient", "question", q.ID, "room", q.RoomID, "by", by)
	l.notifyInbound(ctx, posted)
	return answered, nil
}

// notifyInbound pokes the room session of every owned agent the message was queued for. A
// lost poke strands nothing: the queue is durable and Reconcile pokes rooms with backlog.
// A Quiet message (past the room's hop limit) was queued as context only: it wakes no one.
func (l *Local) notifyInbound(ctx context.Context, m domain.Message) {
	if m.Quiet {
		return
	}
	bindings, err := l.store.OwnedBindingsInRoom(ctx, m.RoomID)
	if err != nil {
		l.log.Warn("cannot find the room sessions to wake; Reconcile will", "room", m.RoomID, "error", err)
		return
	}
	for _, b := range bindings {
		if m.AuthorAgentID != nil && *m.AuthorAgentID == b.AgentID {
			continue
		}
		if err := l.lifecycle.RoomInbound(ctx, b); err != nil {
			l.log.Warn("room session poke failed; Reconcile will retry", "room", m.RoomID,
				"runtime_session", b.RuntimeSessionID, "error", err)
		}
	}
}

// HumanDecider is how a permission decided, or a question answered, by a human's room
// reply records who did it.
func HumanDecider(name string) string { return "human:" + name }

func (l *Local) Messages(ctx context.Context, room uuid.UUID, after int64, limit int) ([]domain.Message, error) {
	return l.store.ListMessages(ctx, room, after, limit)
}

// leaseSlack keeps a waiter's claim alive a little past its wait, covering the response.
const leaseSlack = 10 * time.Second

// receivePoll re-checks the queue when no event arrives: stale leases age out by time alone.
const receivePoll = time.Second

// Receive holds a pull receiver's wait: it claims the lease (one waiter at a time), then
// returns the agent's next message as soon as there is one, or nil after wait. The lease is
// released when the wait ends, also when the caller goes away. An agent that is stopped, or
// stopped while it waits, gets domain.ErrAgentStopped and no message.
func (l *Local) Receive(ctx context.Context, agent uuid.UUID, lease uuid.UUID, wait time.Duration) (*store.Claim, error) {
	waiter := uuid.NewString()
	now := l.now()
	if err := l.store.AcquireReceiveLease(ctx, lease, agent, waiter, now.Add(wait+leaseSlack), now); err != nil {
		return nil, err
	}
	defer func() {
		// The request's context may be gone; the release must still happen.
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := l.store.ReleaseReceiveLease(rctx, lease, waiter, l.now()); err != nil {
			l.log.Warn("receive lease release failed; it expires on its own", "lease", lease, "error", err)
		}
	}()
	sub := l.hub.Subscribe(store.EventFilter{Agent: &agent}, 64)
	defer sub.Close()
	events := sub.C
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(receivePoll)
	defer poll.Stop()
	for {
		// A stop ends the wait: the stop's event wakes it, and a stopped agent claims nothing.
		a, err := l.store.GetAgent(ctx, agent)
		if err != nil {
			return nil, err
		}
		if a.RunIntent == domain.RunIntentStopped {
			return nil, fmt.Errorf("receive for agent %s: %w", agent, domain.ErrAgentStopped)
		}
		c, err := l.store.ClaimInbound(ctx, agent, lease, l.now())
		if err == nil {
			return &c, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, nil
		case _, ok := <-events:
			if !ok {
				events = nil // dropped or shutting down: the poll carries on alone
			}
		case <-poll.C:
		}
	}
}

// Settle settles an attached agent's message; its reply wakes the room's owned agents at
// once, as any posted message does (unless past the hop limit).
func (l *Local) Settle(ctx context.Context, agent, message uuid.UUID, how domain.Settlement, text string) (domain.Inbound, *domain.Message, error) {
	in, reply, err := l.store.Settle(ctx, agent, message, how, text, l.now())
	if err == nil && reply != nil {
		l.notifyInbound(ctx, *reply)
	}
	return in, reply, err
}

func (l *Local) Subscribe(f store.EventFilter, buf int) *Subscription { return l.hub.Subscribe(f, buf) }
