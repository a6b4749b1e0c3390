package test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// fleetNode is one `jam worker` of a test fleet.
type fleetNode struct {
	name, home, state string
	args, env         []string
	// override is set after the owned-runtime environment, so it wins over it.
	override []string
	proc     *proc
}

func (n *fleetNode) start(t *testing.T, p production) {
	t.Helper()
	env := append(append(append([]string{}, p.base...), n.env...), "JAM_HOME="+n.home)
	env = append(append(env, ownedEnv(t, n.state)...), n.override...)
	n.proc = startJam(t, env, append([]string{"worker", "--node", n.name}, n.args...)...)
}

// liveRuntimes is how many provider processes the node's worker holds.
func (n *fleetNode) liveRuntimes(t *testing.T) int {
	return len(providerChildren(t, n.proc.cmd.Process.Pid, testagent.Binary(t)))
}

func nodesByName(t *testing.T, c *client.Client) map[string]api.NodeBody {
	t.Helper()
	var out api.NodeList
	must(t, c.Do(context.Background(), http.MethodGet, "/v1/nodes", nil, &out))
	m := map[string]api.NodeBody{}
	for _, n := range out.Items {
		m[n.Name] = n
	}
	return m
}

// awaitLiveNodes waits until every node of the fleet reports live.
func awaitLiveNodes(t *testing.T, c *client.Client, nodes []*fleetNode) {
	t.Helper()
	wait.Eventually(t, 60*time.Second, func() error {
		m := nodesByName(t, c)
		for _, n := range nodes {
			if m[n.name].State != domain.NodeLive {
				return fmt.Errorf("node %s: %+v", n.name, m[n.name])
			}
		}
		return nil
	}, "%d live nodes", len(nodes))
}

// messageAll posts to every room at once and waits for each reply.
func messageAll(t *testing.T, c *client.Client, rooms []api.RoomBody) {
	t.Helper()
	msgs := make([]api.MessageBody, len(rooms))
	var wg sync.WaitGroup
	for i := range rooms {
		wg.Go(func() { msgs[i] = postText(t, c, rooms[i].ID, "all at once") })
	}
	wg.Wait()
	for _, m := range msgs {
		awaitReply(t, c, m, 2*time.Minute)
	}
}

// TestWakesSpreadOverNodesByFreeCapacityDrainAndFailover runs the production shape with
// three worker nodes: wakes at once spread evenly, no node ever holds more runtimes than its
// --max-runtimes, a full fleet queues a wake with its reason, a drained node takes no new
// runtime, and a room whose node was killed says why it waits until that node is back, then
// answers once on the same provider session.
func TestWakesSpreadOverNodesByFreeCapacityDrainAndFailover(t *testing.T) {
	t.Parallel()
	p := startProductionServer(t, "fleet-token")
	c := p.client
	var nodes []*fleetNode
	for _, name := range []string{"n1", "n2", "n3"} {
		// Reconcile every 2 s: a queued wake is placed again soon after a slot frees.
		n := &fleetNode{name: name, home: t.TempDir(), state: t.TempDir(), args: []string{"--max-runtimes", "15"},
			env: []string{"JAM_RECONCILE_INTERVAL_SECS=2"}}
		n.start(t, p)
		nodes = append(nodes, n)
	}
	awaitLiveNodes(t, c, nodes)
	var agent api.AgentBody
	must(t, c.Do(context.Background(), http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "fleet", Kind: domain.AgentOwned}, &agent))
	sessionOf := map[uuid.UUID]uuid.UUID{} // room -> runtime session
	newRooms := func(prefix string, n int) []api.RoomBody {
		out := make([]api.RoomBody, n)
		for i := range out {
			r, session := roomWith(t, c, fmt.Sprintf("%s-%d", prefix, i), agent.ID)
			out[i], sessionOf[r.ID] = r, session
		}
		return out
	}
	nodeOf := func(r api.RoomBody) string {
		if s := getSession(t, c, sessionOf[r.ID]); s.Runtime != nil {
			return s.Runtime.Node
		}
		return ""
	}

	// No node ever holds more than its 15, whatever arrives: sampled all along.
	var most atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			for _, n := range nodes {
				most.Store(max(most.Load(), int64(n.liveRuntimes(t))))
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	// 30 rooms messaged at once: 10 each, within 20% of even.
	first := newRooms("first", 30)
	messageAll(t, c, first)
	for _, n := range nodes {
		if got := n.liveRuntimes(t); got < 8 || got > 12 {
			t.Fatalf("node %s holds %d runtimes after 30 wakes over 3 nodes, want 10 +-20%%", n.name, got)
		}
	}
	// 15 more fill the fleet; one more waits, saying why.
	messageAll(t, c, newRooms("second", 15))
	queued := newRooms("queued", 1)[0]
	mq := postText(t, c, queued.ID, "any room?")
	wait.Eventually(t, 30*time.Second, func() error {
		if s := getSession(t, c, sessionOf[queued.ID]); s.Runtime == nil || !strings.Contains(s.Runtime.LastError, "full or draining") {
			return fmt.Errorf("session %+v", s.Runtime)
		}
		return nil
	}, "the wake beyond the fleet's capacity to say it waits")
	if rs := repliesTo(t, c, mq); len(rs) != 0 {
		t.Fatalf("a wake beyond capacity was answered: %+v", rs)
	}
	m := nodesByName(t, c)
	for _, n := range nodes {
		if m[n.name].Runtimes != 15 || m[n.name].MaxRuntimes != 15 {
			t.Fatalf("node loads %+v", m)
		}
	}

	// Drain n1, then free a slot on n1 and one on n2: the queued wake takes n2's.
	cli := []string{"JAM_URL=" + p.url, "JAM_TOKEN=fleet-token"}
	if out, err := runJam(t, cli, "node", "drain", "n1"); err != nil || !strings.Contains(out, "draining") {
		t.Fatalf("jam node drain: %v\n%s", err, out)
	}
	freed := map[string]bool{}
	for _, r := range first {
		if n := nodeOf(r); (n == "n1" || n == "n2") && !freed[n] {
			must(t, c.Do(context.Background(), http.MethodPost, "/v1/sessions/"+sessionOf[r.ID].String()+"/stop", map[string]string{}, nil))
			freed[n] = true
		}
	}
	awaitReply(t, c, mq, time.Minute)
	if n := nodeOf(queued); n != "n2" {
		t.Fatalf("the queued wake ran on %q with n1 drained, want n2", n)
	}
	close(stop)
	<-sampled
	if got := most.Load(); got > 15 {
		t.Fatalf("a node (--max-runtimes 15) held %d runtimes at once", got)
	}
	out, err := runJam(t, cli, "node", "list")
	if err != nil || !strings.Contains(out, "RUNTIMES") || !strings.Contains(out, "draining") || !strings.Contains(out, "14/15") {
		t.Fatalf("jam node list: %v\n%s", err, out)
	}
	if _, err := runJam(t, cli, "node", "undrain", "n1"); err != nil {
		t.Fatal(err)
	}

	// Kill n2's worker. One of its rooms is host-native: its workspace and provider state
	// are on n2's disk only, so it says it waits for n2 instead of starting elsewhere.
	var onN2 api.RoomBody
	for _, r := range first[1:] {
		if s := getSession(t, c, sessionOf[r.ID]); s.Runtime != nil && s.Runtime.Node == "n2" && s.Presence == domain.PresenceLive {
			onN2 = r
			break
		}
	}
	if onN2.ID == uuid.Nil {
		t.Fatal("no live room of the first burst ran on n2")
	}
	onN2Session := sessionOf[onN2.ID]
	thread := getSession(t, c, onN2Session).ProviderSessionID
	killed := time.Now()
	if err := nodes[1].proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = nodes[1].proc.exitCode(10 * time.Second)
	m1 := postText(t, c, onN2.ID, "are you there")
	wait.Eventually(t, 60*time.Second, func() error {
		s := getSession(t, c, onN2Session)
		if s.Runtime == nil || !strings.Contains(s.Runtime.LastError, "node n2") || !strings.Contains(s.Runtime.LastError, "not live") {
			return fmt.Errorf("session: presence %s, runtime %+v", s.Presence, s.Runtime)
		}
		return nil
	}, "the room on the killed node to say it waits for n2")
	t.Logf("the room on the killed node said it waits %s after the kill", time.Since(killed).Round(time.Second))
	if st := nodesByName(t, c)["n2"]; st.State != domain.NodeStale {
		t.Fatalf("n2 after the kill: %+v", st)
	}
	// A new room is placed on a live node meanwhile (n1 has its freed slot).
	fresh := newRooms("after-kill", 1)
	messageAll(t, c, fresh)
	if n := nodeOf(fresh[0]); n != "n1" {
		t.Fatalf("room woken after the kill ran on %q, want n1", n)
	}

	// n2 comes back: the waiting room answers, once, on the same provider thread.
	nodes[1].start(t, p)
	r1 := awaitReply(t, c, m1, 2*time.Minute)
	if s := getSession(t, c, onN2Session); s.ProviderSessionID != thread || s.Runtime == nil || s.Runtime.Node != "n2" {
		t.Fatalf("after n2 returned: thread %q (was %q), runtime %+v", s.ProviderSessionID, thread, s.Runtime)
	}
	if rs := repliesTo(t, c, m1); len(rs) != 1 {
		t.Fatalf("message %s answered %d times (first reply %s)", m1.ID, len(rs), r1.ID)
	}
}

// Issue 43: a node without a runtime limit (`jam dev`'s default, here `jam worker
// --max-runtimes 0`) took every wake of a fleet of limited workers, as it always had the
// most free capacity. Placed by the share of capacity in use, 30 wakes at once spread over it
// and two limited workers within 20% of even.
func TestAnUnlimitedNodeTakesItsShareOfWakesNotAll(t *testing.T) {
	t.Parallel()
	p := startProductionServer(t, "mixed-token")
	c := p.client
	var nodes []*fleetNode
	for name, limit := range map[string]string{"dev": "0", "w1": "15", "w2": "15"} {
		n := &fleetNode{name: name, home: t.TempDir(), state: t.TempDir(), args: []string{"--max-runtimes", limit}}
		n.start(t, p)
		nodes = append(nodes, n)
	}
	awaitLiveNodes(t, c, nodes)
	var agent api.AgentBody
	must(t, c.Do(context.Background(), http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "mixed", Kind: domain.AgentOwned}, &agent))
	rooms := make([]api.RoomBody, 30)
	for i := range rooms {
		rooms[i], _ = roomWith(t, c, fmt.Sprintf("room-%d", i), agent.ID)
	}
	messageAll(t, c, rooms)
	for _, n := range nodes {
		if got := n.liveRuntimes(t); got < 8 || got > 12 {
			t.Fatalf("node %s holds %d runtimes after 30 wakes over an unlimited and two limited nodes, want 10 +-20%%", n.name, got)
		}
	}
}
