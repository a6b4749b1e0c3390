package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// twoEchoAgents makes two owned agents on the default template (the echo test agent) in one
// room with the human ada, the room's hop limit set to maxHops through the API.
func twoEchoAgents(t *testing.T, c *client.Client, maxHops int) (room uuid.UUID, agents [2]api.AgentBody, sessions [2]uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	must(t, c.Do(ctx, http.MethodPut, "/v1/settings/"+domain.SettingMaxAgentHops,
		api.PutSettingRequest{Value: json.RawMessage(strconv.Itoa(maxHops))}, nil))
	for i, name := range []string{"alpha", "beta"} {
		must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: name, Kind: domain.AgentOwned}, &agents[i]))
	}
	r, first := roomWith(t, c, "duet", agents[0].ID)
	var p api.ParticipantBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/rooms/"+r.ID.String()+"/participants", map[string]string{"agent_id": agents[1].ID.String()}, &p))
	if p.Session == nil {
		t.Fatalf("adding the second owned agent bound no session: %+v", p)
	}
	return r.ID, agents, [2]uuid.UUID{first, p.Session.RuntimeSessionID}
}

func transcript(t *testing.T, c *client.Client, room uuid.UUID) []api.MessageBody {
	t.Helper()
	var page api.MessageList
	must(t, c.Do(context.Background(), http.MethodGet, "/v1/rooms/"+room.String()+"/messages?limit=500", nil, &page))
	return page.Items
}

// awaitQuiet waits until the room's transcript has not grown for window, and returns it.
func awaitQuiet(t *testing.T, c *client.Client, room uuid.UUID, window, timeout time.Duration) []api.MessageBody {
	t.Helper()
	var (
		msgs    []api.MessageBody
		changed = time.Now()
	)
	wait.Eventually(t, timeout, func() error {
		now := transcript(t, c, room)
		if len(now) != len(msgs) {
			msgs, changed = now, time.Now()
		}
		if quiet := time.Since(changed); quiet < window {
			return fmt.Errorf("%d messages, the last change %s ago", len(msgs), quiet.Round(time.Millisecond))
		}
		return nil
	}, "the transcript of room %s to stop growing for %s", room, window)
	return msgs
}

// posted is what a message_posted event says of a message's hops.
type posted struct {
	ID    uuid.UUID `json:"id"`
	Hops  int       `json:"agent_hops"`
	Wakes bool      `json:"wakes"`
}

// postedHops reads the hop count and wake flag of each of the room's messages from its
// message_posted events, following the event stream until it has seen all of msgs.
func postedHops(t *testing.T, c *client.Client, room uuid.UUID, msgs []api.MessageBody) map[uuid.UUID]posted {
	t.Helper()
	out := map[uuid.UUID]posted{}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := c.Stream(ctx, "/v1/events?room="+room.String(), "0", func(e client.Event) error {
		var p posted
		if e.Data.Kind != domain.EventMessagePosted || json.Unmarshal(e.Data.Payload, &p) != nil {
			return nil
		}
		if out[p.ID] = p; len(out) == len(msgs) {
			return errFound
		}
		return nil
	})
	if !errors.Is(err, errFound) {
		t.Fatalf("message_posted events of %d messages, saw %d (%v)", len(msgs), len(out), err)
	}
	return out
}

// authoredBy reports whether m was written by agent.
func authoredBy(m api.MessageBody, agent uuid.UUID) bool {
	return m.AuthorAgentID != nil && *m.AuthorAgentID == agent
}

// Two echo agents answer each other: without a guard, forever. With a hop limit of 3 both
// answer the human, then the chain runs to the limit and stops; what lies past it is kept
// as context and wakes no one, not even Reconcile (every 2 s here).
func TestAgentChainsStopAtTheHopLimit(t *testing.T) {
	t.Parallel()
	const maxHops = 3
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), "JAM_RECONCILE_INTERVAL_SECS=2"))
	c := d.client
	room, agents, _ := twoEchoAgents(t, c, maxHops)

	// Slow enough that both agents' first turns see only the human's message.
	question := postText(t, c, room, "[[slow 3]] ping")
	wait.Eventually(t, 60*time.Second, func() error {
		rs := repliesTo(t, c, question)
		for _, a := range agents {
			found := false
			for _, r := range rs {
				found = found || authoredBy(r, a.ID)
			}
			if !found {
				return fmt.Errorf("no answer from %s among %d replies", a.Name, len(rs))
			}
		}
		return nil
	}, "both agents to answer the human")

	msgs := awaitQuiet(t, c, room, 10*time.Second, 90*time.Second)
	// Each agent message within the limit is answered at most once (by the other agent),
	// so the chain holds at most two messages per hop, up to the first past the limit.
	if most := 1 + 2*(maxHops+1); len(msgs) > most {
		t.Fatalf("%d messages in the room, at most %d fit the hop limit", len(msgs), most)
	}
	hops := postedHops(t, c, room, msgs)
	past := 0
	for _, m := range msgs {
		h, ok := hops[m.ID]
		if !ok {
			t.Fatalf("no message_posted event for %s", m.ID)
		}
		t.Logf("seq %d: %d hops, wakes %v, %s: %q", m.Seq, h.Hops, h.Wakes, m.AuthorKind, m.Text)
		switch {
		case h.Hops > maxHops+1:
			t.Fatalf("message %q has %d hops: something answered a message past the limit", m.Text, h.Hops)
		case h.Wakes != (h.Hops <= maxHops):
			t.Fatalf("message %q with %d hops says wakes=%v", m.Text, h.Hops, h.Wakes)
		case h.Hops == maxHops+1:
			past++
		}
	}
	if past == 0 {
		t.Fatal("the chain never reached the limit: the guard was not what stopped it")
	}
}

// An owned agent's reply wakes the room's other owned agents at once, not at the next
// Reconcile (a minute away here).
func TestOwnedAgentRepliesWakeTheOtherOwnedAgentsAtOnce(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir()))
	c := d.client
	room, agents, sessions := twoEchoAgents(t, c, 2)

	// Warm up: both runtimes live, and the warm-up chain over.
	postText(t, c, room, "warm up")
	for _, s := range sessions {
		awaitPresence(t, c, s, domain.PresenceLive, 60*time.Second)
	}
	awaitQuiet(t, c, room, 3*time.Second, 60*time.Second)

	// Both answer the human after the same pause, so neither first turn sees the other's
	// answer: each agent learns of it only through the poke its commit sends.
	question := postText(t, c, room, "[[slow 2]] go")
	var first [2]api.MessageBody
	wait.Eventually(t, 30*time.Second, func() error {
		for _, r := range repliesTo(t, c, question) {
			for i, a := range agents {
				if authoredBy(r, a.ID) && first[i].ID == uuid.Nil {
					first[i] = r
				}
			}
		}
		if first[0].ID == uuid.Nil || first[1].ID == uuid.Nil {
			return fmt.Errorf("answers %+v", first)
		}
		return nil
	}, "both agents to answer the human")

	for i, r := range first {
		other := agents[1-i]
		// The other agent's next answer to an agent's message: its reply to r, or to a
		// newer message of the chain when one came in before its turn began.
		var answer api.MessageBody
		wait.Eventually(t, 30*time.Second, func() error {
			for _, m := range transcript(t, c, room) {
				if m.Seq > r.Seq && authoredBy(m, other.ID) && m.ReplyTo != nil && *m.ReplyTo != question.ID {
					answer = m
					return nil
				}
			}
			return fmt.Errorf("no answer from %s after %q", other.Name, r.Text)
		}, "%s to answer %s's reply", other.Name, agents[i].Name)
		latency := answer.CreatedAt.Sub(r.CreatedAt)
		t.Logf("%s replied %s after %s's reply (answering %s, the reply itself: %v)", other.Name, latency.Round(time.Millisecond),
			agents[i].Name, answer.ReplyTo, *answer.ReplyTo == r.ID)
		if latency >= 5*time.Second {
			t.Fatalf("%s answered %s's reply after %s: it waited for Reconcile, not a poke", other.Name, agents[i].Name, latency)
		}
	}
}
