package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

func createPermission(t *testing.T, s *Store, id, agent uuid.UUID, room *uuid.UUID, toolKey string) domain.Permission {
	t.Helper()
	deadline := fixtureTime.Add(time.Minute)
	p, err := s.CreatePermission(context.Background(), domain.Permission{ID: id, AgentID: agent, RoomID: room,
		ToolKey: toolKey, Title: "edit main.go", Summary: "apply a patch", CreatedAt: fixtureTime, Deadline: &deadline})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func permissionEvents(t *testing.T, s *Store, agent uuid.UUID) []domain.EventKind {
	t.Helper()
	evs, err := s.ListEvents(context.Background(), 0, EventFilter{Agent: &agent}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.EventKind
	for _, e := range evs {
		if e.Kind == domain.EventRuntimePermissionAsked || e.Kind == domain.EventRuntimePermissionDecided {
			out = append(out, e.Kind)
		}
	}
	return out
}

func TestPermissionIsDecidedOnceAndRetriesAreIdempotent(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "builder", domain.AgentAttached, "h1")
		room := createRoom(t, s, "lab")
		p := createPermission(t, s, uuid.New(), a.ID, &room.ID, "edit")
		if p.State != domain.PermissionPending || p.Deadline == nil || p.DecidedAt != nil {
			t.Fatalf("created %+v", p)
		}
		got, err := s.GetPermission(ctx, p.ID)
		if err != nil || got.State != domain.PermissionPending || *got.RoomID != room.ID || got.RuntimeSession != nil ||
			got.Title != "edit main.go" || !got.CreatedAt.Equal(fixtureTime) || !got.Deadline.Equal(*p.Deadline) {
			t.Fatalf("read back %+v, %v", got, err)
		}

		at := fixtureTime.Add(time.Second)
		d, err := s.DecidePermission(ctx, p.ID, domain.PermissionAllowOnce, "operator", "looks fine", at)
		if err != nil {
			t.Fatal(err)
		}
		if d.State != domain.PermissionAllowed || d.Decision != domain.PermissionAllowOnce || d.DecidedBy != "operator" ||
			d.Reason != "looks fine" || !d.DecidedAt.Equal(at) {
			t.Fatalf("decided %+v", d)
		}
		// An identical retry (say, a repeated HTTP request) returns the record unchanged.
		again, err := s.DecidePermission(ctx, p.ID, domain.PermissionAllowOnce, "someone else", "", at.Add(time.Minute))
		if err != nil || again.DecidedBy != "operator" || !again.DecidedAt.Equal(at) {
			t.Fatalf("retry: %+v, %v", again, err)
		}
		// A different decision afterwards is a conflict.
		if _, err := s.DecidePermission(ctx, p.ID, domain.PermissionDeny, "operator", "", at); !errors.Is(err, ErrPermissionSettled) || !errors.Is(err, ErrConflict) {
			t.Fatalf("second, different decision: %v", err)
		}
		if _, err := s.ClosePermission(ctx, p.ID, domain.PermissionExpired, "late", at); !errors.Is(err, ErrConflict) {
			t.Fatalf("expiring a decided request: %v", err)
		}
		if _, err := s.DecidePermission(ctx, p.ID, "maybe", "operator", "", at); err == nil {
			t.Fatal("an unknown decision was accepted")
		} else if _, ok := domain.AsValidations(err); !ok {
			t.Fatalf("unknown decision: %v, want a validation error", err)
		}
		if _, err := s.DecidePermission(ctx, uuid.New(), domain.PermissionDeny, "operator", "", at); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown request: %v", err)
		}
		if got, want := permissionEvents(t, s, a.ID), []domain.EventKind{domain.EventRuntimePermissionAsked, domain.EventRuntimePermissionDecided}; !equalKinds(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		if ok, _ := s.HasPermissionRule(ctx, a.ID, "edit"); ok {
			t.Fatal("allow_once recorded an always-rule")
		}

		denied := createPermission(t, s, uuid.New(), a.ID, nil, "execute")
		if denied.RoomID != nil {
			t.Fatalf("room %v, want none", denied.RoomID)
		}
		if d, err := s.DecidePermission(ctx, denied.ID, domain.PermissionDeny, "operator", "", at); err != nil || d.State != domain.PermissionDenied {
			t.Fatalf("deny: %+v, %v", d, err)
		}
	})
}

func equalKinds(a, b []domain.EventKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAllowAlwaysRecordsTheAgentsRuleForTheToolKey(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "builder", domain.AgentAttached, "h1")
		b := createAgent(t, s, "other", domain.AgentAttached, "h2")
		p := createPermission(t, s, uuid.New(), a.ID, nil, "edit")
		if ok, err := s.HasPermissionRule(ctx, a.ID, "edit"); err != nil || ok {
			t.Fatalf("rule before: %v %v", ok, err)
		}
		if _, err := s.DecidePermission(ctx, p.ID, domain.PermissionAllowAlways, "operator", "", fixtureTime); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			agent uuid.UUID
			key   string
			want  bool
		}{{a.ID, "edit", true}, {a.ID, "execute", false}, {b.ID, "edit", false}} {
			if ok, err := s.HasPermissionRule(ctx, c.agent, c.key); err != nil || ok != c.want {
				t.Errorf("rule %s/%s: %v %v, want %v", c.agent, c.key, ok, err, c.want)
			}
		}
		// A second allow_always for the same key keeps the one rule.
		q := createPermission(t, s, uuid.New(), a.ID, nil, "edit")
		if _, err := s.DecidePermission(ctx, q.ID, domain.PermissionAllowAlways, "operator", "", fixtureTime); err != nil {
			t.Fatal(err)
		}
		// Deleting the agent deletes its requests and rules.
		if err := s.DeleteAgent(ctx, a.ID, fixtureTime); err != nil {
			t.Fatal(err)
		}
		if ok, _ := s.HasPermissionRule(ctx, a.ID, "edit"); ok {
			t.Fatal("rule survived its agent")
		}
		if _, err := s.GetPermission(ctx, p.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("request survived its agent: %v", err)
		}
	})
}

func TestClosingAPermissionExpiresOrCancelsOnlyPendingRequests(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "builder", domain.AgentAttached, "h1")
		p := createPermission(t, s, uuid.New(), a.ID, nil, "edit")
		at := fixtureTime.Add(time.Minute)
		c, err := s.ClosePermission(ctx, p.ID, domain.PermissionExpired, "no decision before the deadline", at)
		if err != nil || c.State != domain.PermissionExpired || c.Decision != "" || !c.DecidedAt.Equal(at) {
			t.Fatalf("expire: %+v, %v", c, err)
		}
		if c, err = s.ClosePermission(ctx, p.ID, domain.PermissionExpired, "again", at.Add(time.Second)); err != nil || c.Reason != "no decision before the deadline" {
			t.Fatalf("expire again: %+v, %v", c, err)
		}
		if _, err := s.ClosePermission(ctx, p.ID, domain.PermissionCancelled, "", at); !errors.Is(err, ErrPermissionSettled) {
			t.Fatalf("cancel an expired request: %v", err)
		}
		if _, err := s.DecidePermission(ctx, p.ID, domain.PermissionAllowOnce, "operator", "", at); !errors.Is(err, ErrPermissionSettled) {
			t.Fatalf("decide an expired request: %v", err)
		}
		if _, err := s.ClosePermission(ctx, p.ID, domain.PermissionAllowed, "", at); err == nil {
			t.Fatal("closed as allowed")
		}
		q := createPermission(t, s, uuid.New(), a.ID, nil, "edit")
		if c, err := s.ClosePermission(ctx, q.ID, domain.PermissionCancelled, "turn ended", at); err != nil || c.State != domain.PermissionCancelled {
			t.Fatalf("cancel: %+v, %v", c, err)
		}

		pending := domain.PermissionPending
		r := createPermission(t, s, uuid.New(), a.ID, nil, "edit")
		list, err := s.ListPermissions(ctx, PermissionFilter{State: &pending})
		if err != nil || len(list) != 1 || list[0].ID != r.ID {
			t.Fatalf("pending: %+v, %v", list, err)
		}
		all, err := s.ListPermissions(ctx, PermissionFilter{Agent: &a.ID})
		if err != nil || len(all) != 3 {
			t.Fatalf("all of the agent's: %d, %v", len(all), err)
		}
		if one, err := s.ListPermissions(ctx, PermissionFilter{Limit: 1}); err != nil || len(one) != 1 {
			t.Fatalf("limit 1: %d, %v", len(one), err)
		}
	})
}

func TestPendingPermissionsAreFoundByAUniqueIDPrefixInTheirRoom(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "builder", domain.AgentAttached, "h1")
		room := createRoom(t, s, "lab")
		other := createRoom(t, s, "other")
		first := createPermission(t, s, uuid.MustParse("abcdef01-0000-4000-8000-000000000001"), a.ID, &room.ID, "edit")
		createPermission(t, s, uuid.MustParse("abcdef01-0000-4000-8000-000000000002"), a.ID, &room.ID, "edit")
		decided := createPermission(t, s, uuid.MustParse("12345678-0000-4000-8000-000000000003"), a.ID, &room.ID, "edit")
		if _, err := s.DecidePermission(ctx, decided.ID, domain.PermissionDeny, "operator", "", fixtureTime); err != nil {
			t.Fatal(err)
		}
		createPermission(t, s, uuid.MustParse("fedcba98-0000-4000-8000-000000000004"), a.ID, &other.ID, "edit")

		var ambiguous *AmbiguousPrefixError
		if _, err := s.FindPendingPermissionByPrefix(ctx, room.ID, "abcdef01"); !errors.As(err, &ambiguous) {
			t.Fatalf("shared prefix: %v, want *AmbiguousPrefixError", err)
		}
		if got, err := s.FindPendingPermissionByPrefix(ctx, room.ID, "abcdef01-0000-4000-8000-00000000000"); !errors.As(err, &ambiguous) {
			t.Fatalf("long shared prefix: %+v %v", got, err)
		}
		if got, err := s.FindPendingPermissionByPrefix(ctx, room.ID, "abcdef01-0000-4000-8000-000000000001"); err != nil || got.ID != first.ID {
			t.Fatalf("unique: %+v %v", got, err)
		}
		// Decided requests and other rooms' requests are not candidates.
		for _, c := range []struct {
			room   uuid.UUID
			prefix string
		}{{room.ID, "12345678"}, {room.ID, "fedcba98"}, {other.ID, "abcdef01"}, {room.ID, "00000000"}} {
			if _, err := s.FindPendingPermissionByPrefix(ctx, c.room, c.prefix); !errors.Is(err, ErrNoPendingPermission) || !errors.Is(err, ErrNotFound) {
				t.Errorf("%s in %s: %v, want ErrNoPendingPermission", c.prefix, c.room, err)
			}
		}
		if got, err := s.FindPendingPermissionByPrefix(ctx, other.ID, "fedcba98"); err != nil || got.RoomID == nil || *got.RoomID != other.ID {
			t.Fatalf("other room: %+v %v", got, err)
		}
		for _, bad := range []string{"abcdef0", "ABCDEF01", "abcdef0%", "abcdef0_", ""} {
			if _, err := s.FindPendingPermissionByPrefix(ctx, room.ID, bad); err == nil {
				t.Errorf("prefix %q accepted", bad)
			} else if _, ok := domain.AsValidations(err); !ok {
				t.Errorf("prefix %q: %v, want a validation error", bad, err)
			}
		}
	})
}

func TestAPermissionReplyDecidesAndIsNeverDeliveredAsATurn(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		asker := createAgent(t, s, "builder", domain.AgentAttached, "h1")
		bystander := createAgent(t, s, "reviewer", domain.AgentAttached, "h2")
		room := createRoom(t, s, "lab")
		join(t, s, room.ID, "ada", asker, bystander)
		p := createPermission(t, s, uuid.New(), asker.ID, &room.ID, "edit")

		msg := domain.Message{ID: uuid.New(), RoomID: room.ID, AuthorKind: domain.ParticipantHuman, AuthorHuman: "ada",
			Text: "approve " + p.ID.String()[:8], CreatedAt: fixtureTime.Add(time.Second)}
		// No pending request matches another prefix: nothing is written.
		if _, _, err := s.PostPermissionReply(ctx, domain.Message{ID: uuid.New(), RoomID: room.ID, AuthorKind: domain.ParticipantHuman,
			AuthorHuman: "ada", Text: "approve 00000000", CreatedAt: fixtureTime}, "00000000", domain.PermissionAllowOnce, "human:ada"); !errors.Is(err, ErrNoPendingPermission) {
			t.Fatalf("no match: %v", err)
		}
		if msgs, _ := s.ListMessages(ctx, room.ID, 0, 10); len(msgs) != 0 {
			t.Fatalf("a reply that matched nothing was posted: %+v", msgs)
		}

		posted, decided, err := s.PostPermissionReply(ctx, msg, p.ID.String()[:8], domain.PermissionAllowOnce, "human:ada")
		if err != nil {
			t.Fatal(err)
		}
		if posted.ID != msg.ID || posted.Seq == 0 || posted.Text != msg.Text {
			t.Fatalf("posted %+v", posted)
		}
		if decided.ID != p.ID || decided.State != domain.PermissionAllowed || decided.DecidedBy != "human:ada" {
			t.Fatalf("decided %+v", decided)
		}
		for _, agent := range []domain.Agent{asker, bystander} {
			if un, err := s.ListUnsettled(ctx, agent.ID, nil); err != nil || len(un) != 0 {
				t.Fatalf("agent %s has unsettled rows %+v (%v)", agent.Name, un, err)
			}
			in, err := s.GetInbound(ctx, agent.ID, posted.ID)
			if err != nil || in.State != domain.InboundSettled || in.Settlement != domain.SettledAck {
				t.Fatalf("agent %s inbound %+v, %v", agent.Name, in, err)
			}
		}
		// The transcript keeps the reply; the event log says who decided it.
		if msgs, _ := s.ListMessages(ctx, room.ID, 0, 10); len(msgs) != 1 || msgs[0].ID != posted.ID {
			t.Fatalf("transcript %+v", msgs)
		}
		evs, _ := s.ListEvents(ctx, 0, EventFilter{Room: &room.ID}, 100)
		kinds := map[domain.EventKind]int{}
		for _, e := range evs {
			kinds[e.Kind]++
		}
		if kinds[domain.EventRuntimePermissionDecided] != 1 || kinds[domain.EventMessageSettled] != 2 || kinds[domain.EventInboundQueued] != 2 {
			t.Fatalf("events %v", kinds)
		}
		// The request is no longer pending, so the same reply again matches nothing.
		if _, _, err := s.PostPermissionReply(ctx, domain.Message{ID: uuid.New(), RoomID: room.ID, AuthorKind: domain.ParticipantHuman,
			AuthorHuman: "ada", Text: msg.Text, CreatedAt: fixtureTime}, p.ID.String()[:8], domain.PermissionDeny, "human:ada"); !errors.Is(err, ErrNoPendingPermission) {
			t.Fatalf("reply to a decided request: %v", err)
		}
		// Only humans decide in the room.
		q := createPermission(t, s, uuid.New(), asker.ID, &room.ID, "edit")
		if _, _, err := s.PostPermissionReply(ctx, domain.Message{ID: uuid.New(), RoomID: room.ID, AuthorKind: domain.ParticipantAgent,
			AuthorAgentID: &bystander.ID, Text: "approve", CreatedAt: fixtureTime}, q.ID.String(), domain.PermissionAllowOnce, "agent"); !errors.Is(err, domain.ErrPrecondition) {
			t.Fatalf("agent reply: %v", err)
		}
		// A human who is not in the room cannot decide either; nothing is written.
		if _, _, err := s.PostPermissionReply(ctx, domain.Message{ID: uuid.New(), RoomID: room.ID, AuthorKind: domain.ParticipantHuman,
			AuthorHuman: "mallory", Text: "approve", CreatedAt: fixtureTime}, q.ID.String(), domain.PermissionAllowOnce, "human:mallory"); !errors.Is(err, domain.ErrPrecondition) {
			t.Fatalf("outsider reply: %v", err)
		}
		if got, _ := s.GetPermission(ctx, q.ID); got.State != domain.PermissionPending {
			t.Fatalf("outsider decided: %+v", got)
		}
	})
}
