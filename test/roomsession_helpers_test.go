package test

import (
	"context"
	"encoding/json"
	"errors"
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
)

// ownedEnv is the environment a jam process needs to run owned agents on the test agent:
// the freshly built binary as the default provider and a private state directory for it.
func ownedEnv(t *testing.T, stateDir string, extra ...string) []string {
	return append([]string{"JAM_JAM_TESTAGENT_BIN=" + testagent.Binary(t), "JAM_TESTAGENT_STATE_DIR=" + stateDir}, extra...)
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
	deadline := time.Now().Add(timeout)
	for {
		if rs := repliesTo(t, c, m); len(rs) > 0 {
			return rs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reply to %q within %s", m.Text, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func getSession(t *testing.T, c *client.Client, id uuid.UUID) api.SessionBody {
	t.Helper()
	var s api.SessionBody
	must(t, c.Do(context.Background(), http.MethodGet, "/v1/sessions/"+id.String(), nil, &s))
	return s
}

// awaitPresence waits until the session reports want.
func awaitPresence(t *testing.T, c *client.Client, id uuid.UUID, want domain.Presence, timeout time.Duration) api.SessionBody {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := getSession(t, c, id)
		if s.Presence == want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: presence %s (phase %s, runtime %+v), want %s within %s", id, s.Presence, s.Phase, s.Runtime, want, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
	deadline := time.Now().Add(timeout)
	for {
		got := providerChildren(t, pid, exe)
		if len(got) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("provider children of %d: %v, want %d", pid, got, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
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

// eventually polls cond until it holds, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
