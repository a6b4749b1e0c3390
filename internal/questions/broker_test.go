package questions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/testdb"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

type fixture struct {
	store *store.Store
	// other is a second pool on the same database, as if another process (the API server)
	// answered.
	other  *store.Store
	broker *Broker
	agent  domain.Agent
	room   domain.Room
	ada    domain.Participant
}

func forEachFixture(t *testing.T, fn func(t *testing.T, f *fixture)) {
	testdb.ForEachURL(t, func(t *testing.T, url string) {
		f := &fixture{store: teststore.Open(t, url), other: teststore.Open(t, url)}
		f.broker = &Broker{Store: f.store, Poll: 10 * time.Millisecond}
		ctx := context.Background()
		var err error
		if f.agent, err = f.store.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: "builder", Kind: domain.AgentAttached,
			CreatedAt: time.Now()}, "hash"); err != nil {
			t.Fatal(err)
		}
		if f.room, err = f.store.CreateRoom(ctx, domain.Room{ID: uuid.New(), Name: "lab", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.AddAgentToRoom(ctx, f.room.ID, f.agent.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		f.ada = f.addHuman(t, "ada")
		fn(t, f)
	})
}

func (f *fixture) addHuman(t *testing.T, name string) domain.Participant {
	t.Helper()
	p, err := f.store.AddHumanToRoom(context.Background(), f.room.ID, name, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) request(text string) Ask {
	return Ask{AgentID: f.agent.ID, RoomID: f.room.ID, RuntimeSession: uuid.New(), Text: text}
}

type result struct {
	answer Answer
	err    error
}

// ask runs Ask in the background and returns where its result arrives.
func (f *fixture) ask(ctx context.Context, a Ask) <-chan result {
	out := make(chan result, 1)
	go func() {
		ans, err := f.broker.Ask(ctx, a)
		out <- result{ans, err}
	}()
	return out
}

// pending waits for the question of the session to be recorded, pending.
func (f *fixture) pending(t *testing.T, session uuid.UUID) domain.Question {
	t.Helper()
	var q domain.Question
	wait.Eventually(t, 10*time.Second, func() error {
		qs, err := f.other.ListQuestions(context.Background(), store.QuestionFilter{Room: &f.room.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range qs {
			if c.RuntimeSession == session && c.State == domain.QuestionPending {
				q = c
				return nil
			}
		}
		return fmt.Errorf("%d questions, none pending of session %s", len(qs), session)
	}, "the question to be recorded")
	return q
}

func result1(t *testing.T, c <-chan result) result {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Ask did not return")
		return result{}
	}
}

func (f *fixture) questionCount(t *testing.T) int {
	t.Helper()
	qs, err := f.other.ListQuestions(context.Background(), store.QuestionFilter{Room: &f.room.ID})
	if err != nil {
		t.Fatal(err)
	}
	return len(qs)
}

func TestTheRoomsOnlyHumanIsAskedAndTheirAnswerReturned(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		req := f.request("  Deploy to staging?\x07 ")
		got := f.ask(ctx, req)
		q := f.pending(t, req.RuntimeSession)
		if q.Recipient != "ada" || q.Text != "Deploy to staging?" || q.AgentID != f.agent.ID {
			t.Fatalf("asked %+v", q)
		}
		// ada answers in the room, through another process.
		m := domain.Message{ID: uuid.New(), RoomID: f.room.ID, AuthorKind: domain.ParticipantHuman, AuthorHuman: "ada",
			Text: q.Code + " yes", CreatedAt: time.Now()}
		found, err := f.other.FindQuestionForReply(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.other.PostQuestionAnswer(ctx, m, found, "human:ada"); err != nil {
			t.Fatal(err)
		}
		r := result1(t, got)
		if r.err != nil || r.answer != (Answer{QuestionID: q.ID, State: domain.QuestionAnswered, Text: "yes", By: "human:ada"}) {
			t.Fatalf("answer %+v, %v", r.answer, r.err)
		}
		if stored, _ := f.store.GetQuestion(ctx, q.ID); stored.DeliveredAt == nil {
			t.Fatalf("delivery not recorded: %+v", stored)
		}
	})
}

func TestOneHumanIsAskedOrTheQuestionIsRefused(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		other, err := f.store.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: "reviewer", Kind: domain.AgentAttached,
			CreatedAt: time.Now()}, "hash2")
		if err != nil {
			t.Fatal(err)
		}
		membership, err := f.store.AddAgentToRoom(ctx, f.room.ID, other.ID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		bob := f.addHuman(t, "bob")
		gone := f.addHuman(t, "cy")
		if _, err := f.store.RemoveParticipant(ctx, f.room.ID, gone.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		unknown := uuid.New()

		// Named: bob, not the room's first human.
		req := f.request("Bob, deploy?")
		req.RecipientID = &bob.ID
		c, cancel := context.WithCancel(ctx)
		got := f.ask(c, req)
		if q := f.pending(t, req.RuntimeSession); q.Recipient != "bob" {
			t.Fatalf("asked %s, want bob", q.Recipient)
		}
		cancel()
		if r := result1(t, got); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled ask: %v", r.err)
		}

		before := f.questionCount(t)
		for _, c := range []struct {
			name      string
			recipient *uuid.UUID
			want      error
		}{
			{"several humans, none named", nil, ErrSeveralHumans},
			{"an agent named", &membership.Participant.ID, ErrNotAHuman},
			{"a human who left", &gone.ID, ErrNotAHuman},
			{"an unknown participant", &unknown, ErrNotAHuman},
		} {
			req := f.request("Deploy?")
			req.RecipientID = c.recipient
			_, err := f.broker.Ask(ctx, req)
			var refused *RefusedError
			var pre *domain.PreconditionError
			if !errors.Is(err, c.want) || !errors.As(err, &refused) || !errors.Is(err, domain.ErrPrecondition) ||
				!errors.As(err, &pre) || pre.Reason != refused.Reason {
				t.Errorf("%s: %v, want a refusal matching %v", c.name, err, c.want)
			}
		}
		// No human at all.
		for _, p := range []domain.Participant{f.ada, bob} {
			if _, err := f.store.RemoveParticipant(ctx, f.room.ID, p.ID, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.broker.Ask(ctx, f.request("Anyone?")); !errors.Is(err, ErrNoHuman) {
			t.Fatalf("no human: %v", err)
		}
		if n := f.questionCount(t); n != before {
			t.Fatalf("refused questions were recorded: %d, want %d", n, before)
		}
	})
}

// setting stores the runtime.question.timeout_secs setting.
func (f *fixture) setting(t *testing.T, secs int) {
	t.Helper()
	if err := f.store.PutSetting(context.Background(), domain.SettingQuestionTimeoutSecs, json.RawMessage(strconv.Itoa(secs)), time.Now()); err != nil {
		t.Fatal(err)
	}
}

func TestTheDeadlineIsTheRequestsThenTheAgentsThenTheOperatorsThenTheSettings(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
		f.broker.Now = func() time.Time { return now }
		operator := TimeoutOverride{Set: true, Timeout: 120 * time.Second}
		// In order: the first case runs before any setting is stored.
		for _, c := range []struct {
			name           string
			request, agent *int
			env            TimeoutOverride
			setting        *int // nil: left as it is
			want           time.Duration
			indefinitely   bool
		}{
			{name: "nothing set: the default", want: domain.DefaultQuestionTimeout},
			{name: "the setting", setting: ptr(300), want: 300 * time.Second},
			{name: "the setting, indefinitely", setting: ptr(0), indefinitely: true},
			{name: "the operator's over the setting", env: operator, setting: ptr(300), want: 120 * time.Second},
			{name: "the operator's, indefinitely", env: TimeoutOverride{Set: true}, indefinitely: true},
			{name: "the agent's over the operator's", agent: ptr(60), env: operator, want: time.Minute},
			{name: "the agent's, indefinitely", agent: ptr(0), env: operator, indefinitely: true},
			{name: "the request's over the agent's", request: ptr(30), agent: ptr(60), want: 30 * time.Second},
			{name: "the request's, indefinitely", request: ptr(0), agent: ptr(60), indefinitely: true},
			{name: "the request's, bounded", request: ptr(domain.MaxQuestionTimeoutSecs + 1), want: domain.MaxQuestionTimeoutSecs * time.Second},
		} {
			t.Run(c.name, func(t *testing.T) {
				if _, err := f.store.UpdateAgent(ctx, f.agent.ID, store.AgentUpdate{SetQuestionTimeout: true, QuestionTimeoutSecs: c.agent}, now); err != nil {
					t.Fatal(err)
				}
				f.broker.Timeout = c.env
				if c.setting != nil {
					f.setting(t, *c.setting)
				}
				req := f.request("How long? " + c.name)
				req.TimeoutSecs = c.request
				cctx, cancel := context.WithCancel(ctx)
				got := f.ask(cctx, req)
				q := f.pending(t, req.RuntimeSession)
				cancel()
				result1(t, got)
				switch {
				case c.indefinitely && q.Deadline != nil:
					t.Fatalf("deadline %v, want none", q.Deadline)
				case !c.indefinitely && (q.Deadline == nil || q.Deadline.Sub(now) != c.want):
					t.Fatalf("deadline %v, want %s after %v", q.Deadline, c.want, now)
				}
			})
		}
	})
}

func ptr(v int) *int { return &v }

func TestAnUnansweredQuestionExpiresAndTheRuntimeProceeds(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		req := f.request("Quick?")
		req.TimeoutSecs = ptr(1)
		r := result1(t, f.ask(context.Background(), req))
		if r.err != nil || r.answer.State != domain.QuestionExpired || r.answer.Text != "" {
			t.Fatalf("answer %+v, %v", r.answer, r.err)
		}
		q, err := f.store.GetQuestion(context.Background(), r.answer.QuestionID)
		if err != nil || q.State != domain.QuestionExpired || q.DeliveredAt == nil {
			t.Fatalf("stored %+v, %v", q, err)
		}
	})
}

func TestAnInterruptedAskLeavesItsQuestionAnswerableForTheNextAsk(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		req := f.request("Deploy?")
		first, cancel := context.WithCancel(ctx)
		got := f.ask(first, req)
		q := f.pending(t, req.RuntimeSession)
		cancel()
		if r := result1(t, got); !errors.Is(r.err, context.Canceled) || r.answer.QuestionID != q.ID {
			t.Fatalf("interrupted: %+v, %v", r.answer, r.err)
		}
		if stored, _ := f.store.GetQuestion(ctx, q.ID); stored.State != domain.QuestionPending {
			t.Fatalf("the interrupted question was closed: %+v", stored)
		}

		// Asked again (say, after a restart): the same question, and the answer reaches it.
		second, cancel := context.WithCancel(ctx)
		defer cancel()
		got = f.ask(second, req)
		wait.Never(t, 100*time.Millisecond, func() bool { return f.questionCount(t) != 1 }, "a second question for the same ask")
		if _, err := f.other.AnswerQuestion(ctx, q.ID, "yes", "operator", nil, time.Now()); err != nil {
			t.Fatal(err)
		}
		if r := result1(t, got); r.err != nil || r.answer.State != domain.QuestionAnswered || r.answer.QuestionID != q.ID || r.answer.By != "operator" {
			t.Fatalf("re-ask: %+v, %v", r.answer, r.err)
		}

		// An answer that came while nobody waited is handed to the next identical ask, once.
		later := f.request("Tests green?")
		third, cancel := context.WithCancel(ctx)
		got = f.ask(third, later)
		lq := f.pending(t, later.RuntimeSession)
		cancel()
		result1(t, got)
		if _, err := f.other.AnswerQuestion(ctx, lq.ID, "all green", "operator", nil, time.Now()); err != nil {
			t.Fatal(err)
		}
		a, err := f.broker.Ask(ctx, later)
		if err != nil || a.State != domain.QuestionAnswered || a.Text != "all green" || a.QuestionID != lq.ID {
			t.Fatalf("undelivered answer: %+v, %v", a, err)
		}
		// Delivered now: the same words again are a new question.
		fourth, cancel := context.WithCancel(ctx)
		got = f.ask(fourth, later)
		wait.Eventually(t, 10*time.Second, func() bool { return f.questionCount(t) == 3 }, "a third question")
		if q := f.pending(t, later.RuntimeSession); q.ID == lq.ID {
			t.Fatal("a delivered answer was handed out twice")
		}
		cancel()
		result1(t, got)
	})
}

func TestAnOverdueQuestionLeftPendingIsExpiredNotReused(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		now := time.Now()
		f.broker.Now = func() time.Time { return now }
		req := f.request("Deploy?")
		req.TimeoutSecs = ptr(60)
		c, cancel := context.WithCancel(ctx)
		got := f.ask(c, req)
		q := f.pending(t, req.RuntimeSession)
		cancel()
		result1(t, got)

		// The runtime comes back after the deadline: the old question expires and a new one
		// is asked.
		now = now.Add(2 * time.Minute)
		c, cancel = context.WithCancel(ctx)
		defer cancel()
		got = f.ask(c, req)
		wait.Eventually(t, 10*time.Second, func() bool { return f.questionCount(t) == 2 }, "a second question")
		if again := f.pending(t, req.RuntimeSession); again.ID == q.ID {
			t.Fatal("an overdue question was reused")
		}
		if old, _ := f.store.GetQuestion(ctx, q.ID); old.State != domain.QuestionExpired {
			t.Fatalf("the overdue question: %+v", old)
		}
		cancel()
		result1(t, got)
	})
}

func TestAnEmptyOrOversizedQuestionOrANegativeTimeoutIsRefused(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		for _, c := range []struct {
			name, text string
			timeout    *int
			field      string
		}{
			{"empty", "", nil, "text"},
			{"blank", " \n\x00 ", nil, "text"},
			{"oversized", strings.Repeat("x", domain.MaxQuestionText+1), nil, "text"},
			{"negative timeout", "Deploy?", ptr(-1), "timeout_secs"},
		} {
			req := f.request(c.text)
			req.TimeoutSecs = c.timeout
			_, err := f.broker.Ask(context.Background(), req)
			vs, ok := domain.AsValidations(err)
			if !ok || vs[0].Field != c.field {
				t.Errorf("%s: %v, want a validation error of %s", c.name, err, c.field)
			}
		}
		if n := f.questionCount(t); n != 0 {
			t.Fatalf("%d questions recorded", n)
		}
	})
}

func TestTheOperatorsTimeoutIsParsedFromTheEnvironment(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		raw     string
		want    TimeoutOverride
		wantErr bool
	}{
		{"", TimeoutOverride{}, false},
		{"  ", TimeoutOverride{}, false},
		{"0", TimeoutOverride{Set: true}, false},
		{" 90 ", TimeoutOverride{Set: true, Timeout: 90 * time.Second}, false},
		{strconv.Itoa(domain.MaxQuestionTimeoutSecs), TimeoutOverride{Set: true, Timeout: domain.MaxQuestionTimeoutSecs * time.Second}, false},
		{strconv.Itoa(domain.MaxQuestionTimeoutSecs + 1), TimeoutOverride{}, true},
		{"-1", TimeoutOverride{}, true},
		{"soon", TimeoutOverride{}, true},
		{"1.5", TimeoutOverride{}, true},
	} {
		got, err := TimeoutOverrideFromEnv(func(k string) string {
			if k == EnvTimeout {
				return c.raw
			}
			return ""
		})
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("%q: %+v, %v", c.raw, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), EnvTimeout) {
			t.Errorf("%q: the error does not name the variable: %v", c.raw, err)
		}
	}
}

func TestAQuestionUnansweredWithinTheInlineWaitIsDeferredAndItsAnswerQueuedAsATurn(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		f.broker.Inline = 200 * time.Millisecond
		req := f.request("Deploy to staging?")
		req.TimeoutSecs = ptr(600)
		r := result1(t, f.ask(ctx, req))
		if r.err != nil || !r.answer.Deferred || r.answer.State != domain.QuestionPending || r.answer.Code == "" ||
			r.answer.Recipient != "ada" || r.answer.Deadline == nil {
			t.Fatalf("deferred answer %+v, %v", r.answer, r.err)
		}
		q, err := f.store.GetQuestion(ctx, r.answer.QuestionID)
		if err != nil || q.State != domain.QuestionPending || q.DeferredAt == nil {
			t.Fatalf("stored %+v, %v", q, err)
		}

		// ada answers after the call returned: the answer is queued as the agent's turn.
		m := domain.Message{ID: uuid.New(), RoomID: f.room.ID, AuthorKind: domain.ParticipantHuman, AuthorHuman: "ada",
			Text: q.Code + " yes", CreatedAt: time.Now()}
		found, err := f.other.FindQuestionForReply(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		posted, answered, err := f.other.PostQuestionAnswer(ctx, m, found, "human:ada")
		if err != nil || answered.State != domain.QuestionAnswered || answered.Answer != "yes" || answered.DeliveredAt == nil {
			t.Fatalf("answered %+v, %v", answered, err)
		}
		in, err := f.store.GetInbound(ctx, f.agent.ID, posted.ID)
		if err != nil || in.State == domain.InboundSettled || in.ContextOnly {
			t.Fatalf("the answer is not the asking agent's turn: %+v, %v", in, err)
		}
		// Delivered by the message: the same words again are a new question, not this answer.
		c, cancel := context.WithCancel(ctx)
		got := f.ask(c, req)
		wait.Eventually(t, 10*time.Second, func() bool { return f.questionCount(t) == 2 }, "a second question")
		cancel()
		result1(t, got)
	})
}

func TestAnAnswerBeforeTheInlineWaitEndsIsReturnedNotDeferred(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		f.broker.Inline = time.Minute
		req := f.request("Merge?")
		got := f.ask(ctx, req)
		q := f.pending(t, req.RuntimeSession)
		if _, err := f.other.AnswerQuestion(ctx, q.ID, "yes", "operator", nil, time.Now()); err != nil {
			t.Fatal(err)
		}
		if r := result1(t, got); r.err != nil || r.answer.Deferred || r.answer.State != domain.QuestionAnswered {
			t.Fatalf("answer %+v, %v", r.answer, r.err)
		}
		if stored, _ := f.store.GetQuestion(ctx, q.ID); stored.DeferredAt != nil {
			t.Fatalf("deferred: %+v", stored)
		}
	})
}

func TestAQuestionWhoseDeadlineComesFirstExpiresInsteadOfDeferring(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		f.broker.Inline = time.Minute
		req := f.request("Quick?")
		req.TimeoutSecs = ptr(1)
		if r := result1(t, f.ask(context.Background(), req)); r.err != nil || r.answer.Deferred || r.answer.State != domain.QuestionExpired {
			t.Fatalf("answer %+v, %v", r.answer, r.err)
		}
	})
}

func TestTheInlineWaitIsParsedFromTheEnvironment(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		raw     string
		want    time.Duration
		wantErr bool
	}{
		{"", DefaultInline, false},
		{"0", 0, false},
		{" 5 ", 5 * time.Second, false},
		{"-1", 0, true},
		{"a minute", 0, true},
	} {
		got, err := InlineFromEnv(func(k string) string {
			if k == EnvInline {
				return c.raw
			}
			return ""
		})
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("%q: %v, %v", c.raw, got, err)
		}
	}
}
