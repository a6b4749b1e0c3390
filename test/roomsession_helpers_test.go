package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// ownedEnv is the environment a jam process needs to run owned agents on the test agent:
// the freshly built binary as the default provider and a private state directory for it,
// and the variable sandboxedAgent's template passes to its guest (a template naming a
// variable no live node sets is refused at save).
func ownedEnv(t *testing.T, stateDir string, extra ...string) []string {
	return append([]string{"JAM_JAM_TESTAGENT_BIN=" + testagent.Binary(t), "JAM_TESTAGENT_STATE_DIR=" + stateDir,
		"TEST_GUEST_VALUE=from-the-host"}, extra...)
}

// roomWith creates a room with the human ada and adds agent to it; it returns the room and
// the runtime session the membership bound.
func roomWith(t *testing.T, c *client.Client, name string, agent uuid.UUID) (api.RoomBody, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	var room api.RoomBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/rooms", api.CreateRoomRequest{Name: name}, &room))
	must(t, c.Do(ctx, http.MethodPost, "/v1/rooms/"+room.ID.String()+"/participants", map[string]string{"human": "ada"}, nil))
	var p api.ParticipantBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/rooms/"+room.ID.String()+"/participants", map[string]string{"agent_id": agent.String()}, &p))
	if p.Session == nil {
		t.Fatalf("adding owned agent %s bound no session: %+v", agent, p)
	}
	return room, p.Session.RuntimeSessionID
}

func postText(t *testing.T, c *client.Client, room uuid.UUID, text string) api.MessageBody {
	t.Helper()
	var m api.MessageBody
	must(t, c.Do(context.Background(), http.MethodPost, "/v1/rooms/"+room.String()+"/messages", api.PostMessageRequest{Text: text}, &m))
	return m
}

// repliesTo lists the room's messages that reply to m.
func repliesTo(t *testing.T, c *client.Client, m api.MessageBody) []api.MessageBody {
	t.Helper()
	var page api.MessageList
	must(t, c.Do(context.Background(), http.MethodGet, "/v1/rooms/"+m.RoomID.String()+"/messages?limit=500&after="+strconv.FormatInt(m.Seq, 10), nil, &page))
	var out []api.MessageBody
	for _, r := range page.Items {
		if r.ReplyTo != nil && *r.ReplyTo == m.ID {
			out = append(out, r)
		}
	}
	return out
}

// awaitReply waits for the first reply to m.
func awaitReply(t *testing.T, c *client.Client, m api.MessageBody, timeout time.Duration) api.MessageBody {
	t.Helper()
	var rs []api.MessageBody
	wait.Eventually(t, timeout, func() bool {
		rs = repliesTo(t, c, m)
		return len(rs) > 0
	}, "a reply to %q", m.Text)
	return rs[0]
}

func getSession(t *testing.T, c *client.Client, id uuid.UUID) api.SessionBody {
	t.Helper()
	var s api.SessionBody
	must(t, c.Do(context.Background(), http.MethodGet, "/v1/sessions/"+id.String(), nil, &s))
	return s
}

// runtimeOf is the session's runtime; a session without one fails the test, where a nil
// dereference would end every other test of the package with it.
func runtimeOf(t *testing.T, s api.SessionBody) api.RuntimeBody {
	t.Helper()
	if s.Runtime == nil {
		t.Fatalf("session %s has no runtime (presence %s, phase %s)", s.RuntimeSessionID, s.Presence, s.Phase)
	}
	return *s.Runtime
}

// awaitPresence waits until the session reports want.
func awaitPresence(t *testing.T, c *client.Client, id uuid.UUID, want domain.Presence, timeout time.Duration) api.SessionBody {
	t.Helper()
	var s api.SessionBody
	wait.Eventually(t, timeout, func() error {
		if s = getSession(t, c, id); s.Presence != want {
			return fmt.Errorf("presence %s (phase %s, runtime %+v)", s.Presence, s.Phase, s.Runtime)
		}
		return nil
	}, "session %s to be %s", id, want)
	return s
}

// providerChildren lists the live processes running exe whose parent is pid: the provider
// children a jam process holds.
func providerChildren(t *testing.T, pid int, exe string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err != nil || target != exe {
			continue
		}
		if pid == 0 || parentOf(p) == pid {
			if alive(p) {
				out = append(out, p)
			}
		}
	}
	return out
}

func parentOf(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...; comm may hold spaces, so split after the last ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// awaitChildren waits until pid holds exactly n provider children.
func awaitChildren(t *testing.T, pid int, exe string, n int, timeout time.Duration) {
	t.Helper()
	wait.Eventually(t, timeout, func() error {
		if got := providerChildren(t, pid, exe); len(got) != n {
			return fmt.Errorf("children %v", got)
		}
		return nil
	}, "%d provider children of %d", n, pid)
}

var errFound = errors.New("found")

// awaitEvent follows the room's events from the start until one of kind satisfies match.
func awaitEvent(t *testing.T, c *client.Client, room uuid.UUID, kind domain.EventKind, match func(json.RawMessage) bool, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := c.Stream(ctx, "/v1/events?room="+room.String(), "0", func(e client.Event) error {
		if e.Data.Kind == kind && match(e.Data.Payload) {
			return errFound
		}
		return nil
	})
	if !errors.Is(err, errFound) {
		t.Fatalf("no %s event in room %s within %s (%v)", kind, room, timeout, err)
	}
}

// roomEvents are the room's events so far, as the stream gives them.
func roomEvents(t *testing.T, c *client.Client, room uuid.UUID) []api.EventBody {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var out []api.EventBody
	_ = c.Stream(ctx, "/v1/events?room="+room.String(), "0", func(e client.Event) error {
		if e.Data.Kind != "" {
			out = append(out, e.Data)
		}
		return nil
	})
	if len(out) == 0 {
		t.Fatalf("no events of room %s", room)
	}
	return out
}

// roomEventPayloads are the payloads of the room's events so far.
func roomEventPayloads(t *testing.T, c *client.Client, room uuid.UUID) []string {
	t.Helper()
	var out []string
	for _, e := range roomEvents(t, c, room) {
		out = append(out, string(e.Payload))
	}
	return out
}

// countEvents counts the room's events of kind so far.
func countEvents(t *testing.T, c *client.Client, room uuid.UUID, kind domain.EventKind) int {
	t.Helper()
	n := 0
	for _, e := range roomEvents(t, c, room) {
		if e.Kind == kind {
			n++
		}
	}
	return n
}
