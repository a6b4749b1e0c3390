package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

var (
	// ErrQuestionSettled: the question already left pending (answered with other text,
	// expired or cancelled); answering or closing it differently is refused.
	ErrQuestionSettled = fmt.Errorf("%w: the question is no longer pending", ErrConflict)
	// ErrNoPendingQuestion: no pending question is answered by the room message.
	ErrNoPendingQuestion = fmt.Errorf("%w: no pending question matches", ErrNotFound)
)

// QuestionFilter narrows ListQuestions; nil fields match everything. Limit bounds the
// listing (newest first); 0 means DefaultQuestionLimit.
type QuestionFilter struct {
	State *domain.QuestionState
	Room  *uuid.UUID
	Agent *uuid.UUID
	Limit int
}

// DefaultQuestionLimit is how many questions ListQuestions returns when no limit is given.
const DefaultQuestionLimit = 100

type questionRow struct {
	ID               uuid.UUID  `db:"id"`
	RoomID           uuid.UUID  `db:"room_id"`
	AgentID          uuid.UUID  `db:"agent_id"`
	RuntimeSessionID uuid.UUID  `db:"runtime_session_id"`
	Recipient        string     `db:"recipient"`
	Text             string     `db:"text"`
	Code             string     `db:"code"`
	State            string     `db:"state"`
	Answer           string     `db:"answer"`
	AnsweredBy       string     `db:"answered_by"`
	MessageID        *uuid.UUID `db:"message_id"`
	AnswerMessageID  *uuid.UUID `db:"answer_message_id"`
	DeadlineAt       *time.Time `db:"deadline_at"`
	CreatedAt        time.Time  `db:"created_at"`
	AnsweredAt       *time.Time `db:"answered_at"`
	DeliveredAt      *time.Time `db:"delivered_at"`
	DeferredAt       *time.Time `db:"deferred_at"`
}

const questionColumns = `id, room_id, agent_id, runtime_session_id, recipient, text, code, state, answer, answered_by,
message_id, answer_message_id, deadline_at, created_at, answered_at, delivered_at, deferred_at`

func (r questionRow) domain() domain.Question {
	return domain.Question{ID: r.ID, RoomID: r.RoomID, AgentID: r.AgentID, RuntimeSession: r.RuntimeSessionID,
		Recipient: r.Recipient, Text: r.Text, Code: r.Code, State: domain.QuestionState(r.State), Answer: r.Answer,
		AnsweredBy: r.AnsweredBy, AnswerMessageID: r.AnswerMessageID, MessageID: r.MessageID,
		Deadline: utcPtr(r.DeadlineAt), CreatedAt: utc(r.CreatedAt), AnsweredAt: utcPtr(r.AnsweredAt),
		DeliveredAt: utcPtr(r.DeliveredAt), DeferredAt: utcPtr(r.DeferredAt)}
}

// questionEvent is the payload of question_asked and question_answered.
type questionEvent struct {
	ID               uuid.UUID            `json:"id"`
	RuntimeSessionID uuid.UUID            `json:"runtime_session_id"`
	Recipient        string               `json:"recipient"`
	Code             string               `json:"code"`
	Text             string               `json:"text,omitempty"`
	State            domain.QuestionState `json:"state"`
	Answer           string               `json:"answer,omitempty"`
	AnsweredBy       string               `json:"answered_by,omitempty"`
	MessageID        *uuid.UUID           `json:"message_id,omitempty"`
	AnswerMessageID  *uuid.UUID           `json:"answer_message_id,omitempty"`
	DeadlineAt       *time.Time           `json:"deadline_at,omitempty"`
}

func questionEventOf(kind domain.EventKind, qu domain.Question) domain.Event {
	ev := questionEvent{ID: qu.ID, RuntimeSessionID: qu.RuntimeSession, Recipient: qu.Recipient, Code: qu.Code,
		State: qu.State, Answer: qu.Answer, AnsweredBy: qu.AnsweredBy, MessageID: qu.MessageID,
		AnswerMessageID: qu.AnswerMessageID, DeadlineAt: qu.Deadline}
	if kind == domain.EventQuestionAsked {
		ev.Text = qu.Text
	}
	return NewEvent(kind, &qu.RoomID, &qu.AgentID, ev)
}

// overdue reports whether a pending question's deadline has passed at at.
func overdue(qu domain.Question, at time.Time) bool {
	return qu.Deadline != nil && !at.Before(*qu.Deadline)
}

// maxCodeTries bounds the search for a free code: about half of the codes have a digit and
// hardly any is taken, so a few tries do.
const maxCodeTries = 32

// CreateQuestion asks a question: in one transaction it posts the question as the asking
// agent's room message (domain.QuestionMessage, naming the recipient and the answer code),
// records the pending question and appends question_asked. The recipient must be an active
// human participant and the agent an active participant of the room. An empty qu.Code is
// replaced by a fresh code no other pending question of the room holds; state, answer and
// message fields of qu are ignored. The room's other agents get the question message as
// context only: it wakes none of them.
func (q *Q) CreateQuestion(ctx context.Context, qu domain.Question) (domain.Question, error) {
	qu.CreatedAt = domain.Timestamp(qu.CreatedAt)
	if qu.Deadline != nil {
		d := domain.Timestamp(*qu.Deadline)
		qu.Deadline = &d
	}
	qu.State, qu.Answer, qu.AnsweredBy, qu.AnswerMessageID, qu.AnsweredAt, qu.DeliveredAt = domain.QuestionPending, "", "", nil, nil, nil
	err := q.atomic(ctx, func(q *Q) error {
		if err := q.requireHuman(ctx, qu.RoomID, qu.Recipient); err != nil {
			return err
		}
		if qu.Code == "" {
			var err error
			if qu.Code, err = q.freeQuestionCode(ctx, qu.RoomID); err != nil {
				return err
			}
		}
		m, err := q.postMessage(ctx, domain.Message{ID: uuid.New(), RoomID: qu.RoomID, AuthorKind: domain.ParticipantAgent,
			AuthorAgentID: &qu.AgentID, Text: domain.QuestionMessage(qu.Recipient, qu.Code, qu.Text), CreatedAt: qu.CreatedAt})
		if err != nil {
			return err
		}
		qu.MessageID = &m.ID
		// A question is for its human: the other agents see it as context with their next
		// turn, but it wakes none of them.
		if _, err := q.exec(ctx, `UPDATE inbound SET context_only = ? WHERE message_id = ?`, true, m.ID); err != nil {
			return err
		}
		if _, err := q.exec(ctx, `
INSERT INTO questions (id, room_id, agent_id, runtime_session_id, recipient, text, code, state, message_id, deadline_at, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, qu.ID, qu.RoomID, qu.AgentID, qu.RuntimeSession, qu.Recipient, qu.Text, qu.Code,
			qu.State, qu.MessageID, qu.Deadline, qu.CreatedAt); err != nil {
			return err
		}
		_, err = q.appendEvents(ctx, qu.CreatedAt, questionEventOf(domain.EventQuestionAsked, qu))
		return err
	})
	if err != nil {
		return domain.Question{}, fmt.Errorf("create question of agent %s in room %s: %w", qu.AgentID, qu.RoomID, err)
	}
	return qu, nil
}

// requireHuman refuses a recipient who is not an active human participant of the room.
func (q *Q) requireHuman(ctx context.Context, room uuid.UUID, name string) error {
	ps, err := q.ListParticipants(ctx, room)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p.Kind == domain.ParticipantHuman && p.HumanName == name {
			return nil
		}
	}
	return domain.Refuse("%s is not a human in this room", strconv.Quote(name))
}

// freeQuestionCode picks a code no pending question of the room holds. Writers run one at
// a time, so the code stays free until this transaction commits. A code has a digit, so
// that no ordinary word at the start of a message ("Sure", "Make") reads as one.
func (q *Q) freeQuestionCode(ctx context.Context, room uuid.UUID) (string, error) {
	var taken []string
	if err := q.selectAll(ctx, &taken, `SELECT code FROM questions WHERE room_id = ? AND state = ?`, room, domain.QuestionPending); err != nil {
		return "", err
	}
	for range maxCodeTries {
		code := domain.NewQuestionCode()
		if strings.ContainsAny(code, "23456789") && !slices.Contains(taken, code) {
			return code, nil
		}
	}
	return "", fmt.Errorf("no free question code in room %s after %d tries", room, maxCodeTries)
}

// GetQuestion reads one question.
func (q *Q) GetQuestion(ctx context.Context, id uuid.UUID) (domain.Question, error) {
	var r questionRow
	if err := q.get(ctx, &r, `SELECT `+questionColumns+` FROM questions WHERE id = ?`, id); err != nil {
		return domain.Question{}, fmt.Errorf("get question %s: %w", id, err)
	}
	return r.domain(), nil
}

// ListQuestions lists questions, newest first.
func (q *Q) ListQuestions(ctx context.Context, f QuestionFilter) ([]domain.Question, error) {
	var (
		where []string
		args  []any
	)
	if f.State != nil {
		where, args = append(where, "state = ?"), append(args, *f.State)
	}
	if f.Room != nil {
		where, args = append(where, "room_id = ?"), append(args, *f.Room)
	}
	if f.Agent != nil {
		where, args = append(where, "agent_id = ?"), append(args, *f.Agent)
	}
	query := `SELECT ` + questionColumns + ` FROM questions`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultQuestionLimit
	}
	query += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := q.questions(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list questions: %w", err)
	}
	return rows, nil
}

func (q *Q) questions(ctx context.Context, query string, args ...any) ([]domain.Question, error) {
	var rows []questionRow
	if err := q.selectAll(ctx, &rows, query, args...); err != nil {
		return nil, err
	}
	out := make([]domain.Question, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// ReusableQuestion finds what a runtime session's repeated ask of the same text picks up:
// its newest question with that text that is still pending, or answered but not yet
// handed to the runtime (the answer came while nobody waited, say across a worker
// restart). None is ErrNotFound.
func (q *Q) ReusableQuestion(ctx context.Context, session uuid.UUID, text string) (domain.Question, error) {
	rows, err := q.questions(ctx, `SELECT `+questionColumns+` FROM questions
WHERE runtime_session_id = ? AND text = ? AND (state = ? OR (state = ? AND delivered_at IS NULL))
ORDER BY created_at DESC, id DESC LIMIT 1`, session, text, domain.QuestionPending, domain.QuestionAnswered)
	if err != nil {
		return domain.Question{}, fmt.Errorf("reusable question of session %s: %w", session, err)
	}
	if len(rows) == 0 {
		return domain.Question{}, fmt.Errorf("reusable question of session %s: %w", session, ErrNotFound)
	}
	return rows[0], nil
}

// AnswerQuestion answers a pending question. An identical answer again returns the record
// and changes nothing; any other answer once the question left pending is
// ErrQuestionSettled (an ErrConflict), returned with the question as it stands. A pending
// question whose deadline passed by at is expired (and that is committed) instead.
// answerMessage is the room message that carried the answer, if one did.
func (q *Q) AnswerQuestion(ctx context.Context, id uuid.UUID, answer, answeredBy string, answerMessage *uuid.UUID, at time.Time) (domain.Question, error) {
	if err := validateAnswer(answer); err != nil {
		return domain.Question{}, err
	}
	at = domain.Timestamp(at)
	var (
		out     domain.Question
		settled bool
	)
	err := q.atomic(ctx, func(q *Q) error {
		cur, err := q.GetQuestion(ctx, id)
		if err != nil {
			return err
		}
		if cur.State == domain.QuestionPending && overdue(cur, at) {
			if cur, err = q.closeQuestion(ctx, cur, domain.QuestionExpired, at); err != nil {
				return err
			}
		}
		if cur.State != domain.QuestionPending {
			out = cur
			// The refusal is returned after the commit, so a lazy expiry above is kept.
			settled = cur.State != domain.QuestionAnswered || cur.Answer != answer
			return nil
		}
		out, err = q.answerQuestion(ctx, cur, answer, answeredBy, answerMessage, at)
		return err
	})
	if err != nil {
		return domain.Question{}, fmt.Errorf("answer question %s: %w", id, err)
	}
	if settled {
		return out, fmt.Errorf("answer question %s, which is %s: %w", id, out.State, ErrQuestionSettled)
	}
	return out, nil
}

// validateAnswer keeps an answer storable and bounded.
func validateAnswer(answer string) error {
	if strings.TrimSpace(answer) == "" {
		return &domain.ValidationError{Field: "text", Detail: "must not be empty"}
	}
	return domain.ValidateText("text", answer, domain.MaxAnswerText)
}

// answerQuestion records the answer of a pending question inside the caller's transaction.
func (q *Q) answerQuestion(ctx context.Context, cur domain.Question, answer, answeredBy string, answerMessage *uuid.UUID, at time.Time) (domain.Question, error) {
	cur.State, cur.Answer, cur.AnsweredBy, cur.AnswerMessageID, cur.AnsweredAt = domain.QuestionAnswered, answer, answeredBy, answerMessage, &at
	if _, err := q.exec(ctx, `
UPDATE questions SET state = ?, answer = ?, answered_by = ?, answer_message_id = ?, answered_at = ? WHERE id = ? AND state = ?`,
		cur.State, cur.Answer, cur.AnsweredBy, cur.AnswerMessageID, at, cur.ID, domain.QuestionPending); err != nil {
		return cur, err
	}
	_, err := q.appendEvents(ctx, at, questionEventOf(domain.EventQuestionAnswered, cur))
	return cur, err
}

// CloseQuestion ends a pending question nobody answered: expired (its deadline passed) or
// cancelled (the asking runtime went away for good). Closing it again the same way returns
// the record; a question that left pending otherwise is ErrQuestionSettled, returned with
// the question as it stands.
func (q *Q) CloseQuestion(ctx context.Context, id uuid.UUID, state domain.QuestionState, at time.Time) (domain.Question, error) {
	if state != domain.QuestionExpired && state != domain.QuestionCancelled {
		return domain.Question{}, fmt.Errorf("close question %s as %q: only %s or %s", id, state,
			domain.QuestionExpired, domain.QuestionCancelled)
	}
	at = domain.Timestamp(at)
	var out domain.Question
	err := q.atomic(ctx, func(q *Q) error {
		cur, err := q.GetQuestion(ctx, id)
		if err != nil {
			return err
		}
		if cur.State != domain.QuestionPending {
			out = cur
			return nil
		}
		out, err = q.closeQuestion(ctx, cur, state, at)
		return err
	})
	if err != nil {
		return domain.Question{}, fmt.Errorf("close question %s: %w", id, err)
	}
	if out.State != state {
		return out, fmt.Errorf("close question %s as %s, which is %s: %w", id, state, out.State, ErrQuestionSettled)
	}
	return out, nil
}

func (q *Q) closeQuestion(ctx context.Context, cur domain.Question, state domain.QuestionState, at time.Time) (domain.Question, error) {
	cur.State, cur.AnsweredAt = state, &at
	if _, err := q.exec(ctx, `UPDATE questions SET state = ?, answered_at = ? WHERE id = ? AND state = ?`,
		state, at, cur.ID, domain.QuestionPending); err != nil {
		return cur, err
	}
	_, err := q.appendEvents(ctx, at, questionEventOf(domain.EventQuestionAnswered, cur))
	return cur, err
}

// ExpireOverdue marks every pending question whose deadline passed by now expired (one
// question_answered event each) and returns them. Questions are expired lazily: a
// question whose asker went away stays pending, and answerable, until its deadline, and
// the listing and answering paths call this first.
func (q *Q) ExpireOverdue(ctx context.Context, now time.Time) ([]domain.Question, error) {
	now = domain.Timestamp(now)
	const overdueQuery = `SELECT ` + questionColumns + ` FROM questions
WHERE state = ? AND deadline_at IS NOT NULL AND deadline_at <= ? ORDER BY created_at, id`
	// Look first without the writer lock: nearly always there is nothing to expire.
	due, err := q.questions(ctx, overdueQuery, domain.QuestionPending, now)
	if err != nil || len(due) == 0 {
		if err != nil {
			err = fmt.Errorf("expire overdue questions: %w", err)
		}
		return nil, err
	}
	var expired []domain.Question
	err = q.atomic(ctx, func(q *Q) error {
		expired = nil
		due, err := q.questions(ctx, overdueQuery, domain.QuestionPending, now)
		if err != nil {
			return err
		}
		for _, cur := range due {
			closed, err := q.closeQuestion(ctx, cur, domain.QuestionExpired, now)
			if err != nil {
				return err
			}
			expired = append(expired, closed)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire overdue questions: %w", err)
	}
	return expired, nil
}

// MarkQuestionDelivered records that the question's outcome was handed to the asking
// runtime; the first time counts. A pending question is not marked.
func (q *Q) MarkQuestionDelivered(ctx context.Context, id uuid.UUID, at time.Time) (domain.Question, error) {
	if _, err := q.exec(ctx, `UPDATE questions SET delivered_at = ? WHERE id = ? AND delivered_at IS NULL AND state <> ?`,
		domain.Timestamp(at), id, domain.QuestionPending); err != nil {
		return domain.Question{}, fmt.Errorf("mark question %s delivered: %w", id, err)
	}
	return q.GetQuestion(ctx, id)
}

// FindQuestionForReply finds the pending question a human's room message answers: one of
// the same room whose recipient is the message's author, whose deadline has not passed at
// the message's time, and that the message either replies to (ReplyTo is the question's
// message) or names by its code ("Q7K2 yes"), with a non-empty answer. None is
// ErrNoPendingQuestion (an ErrNotFound).
func (q *Q) FindQuestionForReply(ctx context.Context, m domain.Message) (domain.Question, error) {
	if m.AuthorKind != domain.ParticipantHuman {
		return domain.Question{}, ErrNoPendingQuestion
	}
	code, _, coded := domain.ParseQuestionAnswer(m.Text)
	if m.ReplyTo == nil && !coded {
		return domain.Question{}, ErrNoPendingQuestion
	}
	candidates, err := q.questions(ctx, `SELECT `+questionColumns+` FROM questions
WHERE room_id = ? AND state = ? AND recipient = ? AND (deadline_at IS NULL OR deadline_at > ?) ORDER BY created_at, id`,
		m.RoomID, domain.QuestionPending, m.AuthorHuman, domain.Timestamp(m.CreatedAt))
	if err != nil {
		return domain.Question{}, fmt.Errorf("find the question %s's message answers in room %s: %w", m.AuthorHuman, m.RoomID, err)
	}
	// A reply to the question's own message wins over a code.
	for _, byReply := range []bool{true, false} {
		for _, c := range candidates {
			if (byReply && repliesTo(m, c)) || (!byReply && coded && code == c.Code) {
				if replyAnswer(m, c) != "" {
					return c, nil
				}
			}
		}
	}
	return domain.Question{}, ErrNoPendingQuestion
}

func repliesTo(m domain.Message, qu domain.Question) bool {
	return m.ReplyTo != nil && qu.MessageID != nil && *m.ReplyTo == *qu.MessageID
}

// replyAnswer is the answer a correlated message gives: its text after the question's
// code, else, for a reply to the question's message, its whole text; bounded to
// domain.MaxAnswerText (the transcript keeps the whole message). "" is no answer.
func replyAnswer(m domain.Message, qu domain.Question) string {
	if code, answer, ok := domain.ParseQuestionAnswer(m.Text); ok && code == qu.Code {
		if answer = strings.TrimSpace(answer); answer != "" {
			return domain.Truncate(answer, domain.MaxAnswerText)
		}
	}
	if repliesTo(m, qu) {
		return domain.Truncate(strings.TrimSpace(m.Text), domain.MaxAnswerText)
	}
	return ""
}

// PostQuestionAnswer is a human's room message that answers a pending question (found by
// FindQuestionForReply): in one transaction it posts m to the room, answers the question
// (answered by answeredBy, linked to m) and settles every inbound row m queued as an
// acknowledgement, so no agent receives the answer as a turn: the asking runtime gets it
// from the question. When the question is no longer pending for m (answered meanwhile,
// overdue, not m's) it writes nothing and returns ErrNoPendingQuestion, and the caller
// posts m as an ordinary message.
func (q *Q) PostQuestionAnswer(ctx context.Context, m domain.Message, qu domain.Question, answeredBy string) (domain.Message, domain.Question, error) {
	if m.AuthorKind != domain.ParticipantHuman {
		return domain.Message{}, domain.Question{}, domain.Refuse("only a human answers a question in the room")
	}
	m.CreatedAt = domain.Timestamp(m.CreatedAt)
	err := q.atomic(ctx, func(q *Q) error {
		cur, err := q.GetQuestion(ctx, qu.ID)
		switch {
		case errors.Is(err, ErrNotFound):
			return ErrNoPendingQuestion
		case err != nil:
			return err
		}
		answer := replyAnswer(m, cur)
		if cur.State != domain.QuestionPending || overdue(cur, m.CreatedAt) || cur.RoomID != m.RoomID ||
			cur.Recipient != m.AuthorHuman || answer == "" {
			return ErrNoPendingQuestion
		}
		if m, err = q.postMessage(ctx, m); err != nil {
			return err
		}
		if qu, err = q.answerQuestion(ctx, cur, answer, answeredBy, &m.ID, m.CreatedAt); err != nil {
			return err
		}
		if cur.DeferredAt == nil {
			return q.ackAll(ctx, m.ID, m.CreatedAt)
		}
		// The asking call returned unanswered: the answer is the asking agent's next turn.
		// Its inbound row stays queued (a human's message wakes); the message itself
		// delivers the answer.
		if _, err := q.exec(ctx, `UPDATE questions SET delivered_at = ? WHERE id = ?`, m.CreatedAt, cur.ID); err != nil {
			return err
		}
		qu.DeliveredAt = &m.CreatedAt
		return q.ackAllBut(ctx, m.ID, cur.AgentID, m.CreatedAt)
	})
	if err != nil {
		if errors.Is(err, ErrNoPendingQuestion) {
			return domain.Message{}, domain.Question{}, err
		}
		return domain.Message{}, domain.Question{}, fmt.Errorf("post the answer to question %s: %w", qu.ID, err)
	}
	return m, qu, nil
}

// DeferQuestion records that the asking tool call of a pending question returned before the
// answer came: the answer will reach the asking agent as the room message that gives it. A
// question that is not pending, or already deferred, is returned as it stands.
func (q *Q) DeferQuestion(ctx context.Context, id uuid.UUID, at time.Time) (domain.Question, error) {
	if _, err := q.exec(ctx, `UPDATE questions SET deferred_at = ? WHERE id = ? AND state = ? AND deferred_at IS NULL`,
		domain.Timestamp(at), id, domain.QuestionPending); err != nil {
		return domain.Question{}, fmt.Errorf("defer question %s: %w", id, err)
	}
	return q.GetQuestion(ctx, id)
}

// cancelQuestionsOf cancels the room's pending questions a departing participant leaves
// unanswerable: those the agent asked, or those put to the human. A runtime still waiting
// on one gets "no answer" and proceeds.
func (q *Q) cancelQuestionsOf(ctx context.Context, p domain.Participant, at time.Time) error {
	who, arg := "recipient", any(p.HumanName)
	if p.AgentID != nil {
		who, arg = "agent_id", *p.AgentID
	}
	pending, err := q.questions(ctx, `SELECT `+questionColumns+` FROM questions WHERE room_id = ? AND state = ? AND `+who+` = ?`,
		p.RoomID, domain.QuestionPending, arg)
	if err != nil {
		return fmt.Errorf("pending questions of a departing participant: %w", err)
	}
	for _, qu := range pending {
		if _, err := q.closeQuestion(ctx, qu, domain.QuestionCancelled, at); err != nil {
			return err
		}
	}
	return nil
}
