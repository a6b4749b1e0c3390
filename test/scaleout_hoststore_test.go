package test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// The production shape with two `jam worker` nodes whose runtime-host roots are one shared
// directory (--host-store, as a shared filesystem mounted at the same path): a host-native
// Claude Code room (keep-alive, so never reaped), whose workspace and Claude session are in
// its host root, leaves a drained node between turns and answers on the other on the same
// Claude session; when that node's worker is SIGKILLed, the room's next message is answered
// by the first node within 45 s of the kill, exactly once, on the same Claude session.
func TestAHostNativeRoomMovesToANodeSharingItsHostStoreOnDrainAndWhenItsNodeDies(t *testing.T) {
	t.Parallel()
	realagent.Require(t, "claude")
	model := codexModel(t)
	p := startProductionServer(t, "hoststore-token")
	c := p.client
	shared := t.TempDir()
	nodes := map[string]*fleetNode{}
	for _, name := range []string{"h1", "h2"} {
		n := &fleetNode{name: name, home: t.TempDir(), state: t.TempDir(), args: []string{"--host-store", shared},
			env: []string{"ANTHROPIC_BASE_URL=" + model.URL, "ANTHROPIC_API_KEY=x", "JAM_RECONCILE_INTERVAL_SECS=2"}}
		n.start(t, p)
		nodes[name] = n
	}
	wait.Eventually(t, 60*time.Second, func() error {
		m := nodesByName(t, c)
		if m["h1"].State != domain.NodeLive || m["h2"].State != domain.NodeLive {
			return fmt.Errorf("nodes %+v", m)
		}
		if m["h1"].HostStore == "" || m["h1"].HostStore != m["h2"].HostStore {
			return fmt.Errorf("host stores %q and %q", m["h1"].HostStore, m["h2"].HostStore)
		}
		return nil
	}, "two live nodes sharing one host store")
	other := map[string]string{"h1": "h2", "h2": "h1"}
	// Operators see which nodes share: the same store id on both rows.
	short := strings.SplitN(nodesByName(t, c)["h1"].HostStore, ":", 2)[0][:8]
	if out, err := runJam(t, []string{"JAM_URL=" + p.url, "JAM_TOKEN=hoststore-token"}, "node", "list"); err != nil ||
		!strings.Contains(out, "HOST STORE") || strings.Count(out, short) != 2 {
		t.Fatalf("jam node list: %v\n%s", err, out)
	}

	// The catalog's keep-alive for Claude: no idle reap, so only the move makes it leave.
	agent := codexAgent(t, c, "claude", claudeTemplate(""))
	room, session := roomWith(t, c, "lab", agent)
	awaitReply(t, c, postText(t, c, room.ID, "hello"), 2*time.Minute)
	s := getSession(t, c, session)
	thread, first := s.ProviderSessionID, runtimeOf(t, s).Node
	if thread == "" || nodes[first] == nil {
		t.Fatalf("after the first answer: %+v", s)
	}

	// Drain its node: Reconcile tells the room it can move, its runtime stops between turns,
	// and its next wake goes to the other node, which reaches its files and resumes the same
	// Claude session.
	must(t, c.Do(context.Background(), http.MethodPost, "/v1/nodes/"+first+"/drain", map[string]string{}, nil))
	wait.Eventually(t, time.Minute, func() bool { return getSession(t, c, session).Presence == domain.PresenceDormant },
		"the keep-alive runtime to leave the drained node")
	m := postText(t, c, room.ID, "still there?")
	awaitReply(t, c, m, 2*time.Minute)
	s = getSession(t, c, session)
	second := runtimeOf(t, s).Node
	if second != other[first] || s.ProviderSessionID != thread {
		t.Fatalf("after the drain: node %q (want %q), thread %q (want %q)", second, other[first], s.ProviderSessionID, thread)
	}
	must(t, c.Do(context.Background(), http.MethodPost, "/v1/nodes/"+first+"/undrain", map[string]string{}, nil))

	// Kill the node the room now runs on: the other node takes the room once the dead one is
	// stale, on the same Claude session, within 45 s of the kill.
	killed := time.Now()
	if err := nodes[second].proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = nodes[second].proc.exitCode(10 * time.Second)
	m = postText(t, c, room.ID, "and now?")
	r := awaitReply(t, c, m, 2*time.Minute)
	took := time.Since(killed)
	t.Logf("the room was answered %s after its node was killed", took.Round(time.Second))
	s = getSession(t, c, session)
	if s.Runtime == nil || s.Runtime.Node != first || s.ProviderSessionID != thread {
		t.Fatalf("after the kill: runtime %+v, thread %q (want %q on %s)", s.Runtime, s.ProviderSessionID, thread, first)
	}
	if took > 45*time.Second {
		t.Fatalf("answered %s after the kill, want within 45 s", took.Round(time.Second))
	}
	wait.Never(t, 2*time.Second, func() bool { return len(repliesTo(t, c, m)) != 1 },
		fmt.Sprintf("message %s answered other than exactly once (first reply %s)", m.ID, r.ID))
	// The model saw the earlier turns: the same conversation went on.
	last := model.Requests()[len(model.Requests())-1].AllText()
	for _, earlier := range []string{"hello", "still there?"} {
		if !strings.Contains(last, earlier) {
			t.Fatalf("the model's input after the move lacks %q: the Claude session did not carry over", earlier)
		}
	}
}
