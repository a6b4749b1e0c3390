package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
)

// The provider benchmark of `make bench` (JAM_BENCH=1): host-native, through jam dev, the
// real codex, claude and copilot against the scripted model server, beside the ACP test agent
// measured the same way. Wake: a post to a dormant room (a new thread, or a reaped room
// resuming its thread) -> the turn starts (Jam has sent the provider the turn); live: a
// post to a live room -> its reply. It reports to bench/providers.json; it does not gate.
func TestProviderBenchmark(t *testing.T) {
	t.Parallel()
	if os.Getenv("JAM_BENCH") != "1" {
		t.Skip("benchmark: run with `make bench` (JAM_BENCH=1)")
	}
	realagent.Require(t, "codex")
	realagent.Require(t, "claude")
	realagent.Require(t, "copilot")
	model, err := stubmodel.Start(stubmodel.ReplyTool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close() })
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), ownedEnv(t, t.TempDir(), "JAM_OWNED_RUNTIME_IDLE_SECS=2",
		"CODEX_HOME="+t.TempDir(), "STUB_MODEL_KEY=x", "ANTHROPIC_BASE_URL="+model.URL, "ANTHROPIC_API_KEY=x",
		"COPILOT_HOME="+copilotHome(t)))
	c, ctx := d.client, context.Background()
	var acp api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "acp", Kind: domain.AgentOwned}, &acp))
	rep := map[string]providerBench{
		"codex": benchAgent(t, c, codexAgent(t, c, "codex", codexTemplate(model, nil))),
		// Reaped when idle (the catalog keeps Claude alive), so re-wake is measured.
		"claude":  benchAgent(t, c, codexAgent(t, c, "claude", claudeTemplate(domain.IdleAllow))),
		"copilot": benchAgent(t, c, codexAgent(t, c, "copilot", copilotTemplate(model))),
		"acp":     benchAgent(t, c, acp.ID),
	}
	out := os.Getenv("JAM_BENCH_PROVIDERS_OUT")
	if out == "" {
		out = filepath.Join("..", "bench", "providers.json")
	}
	raw, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(out, append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"codex", "claude", "copilot", "acp"} {
		r := rep[k]
		t.Logf("%-7s first wake p50 %.0f ms p95 %.0f ms | re-wake (resume) p50 %.0f ms p95 %.0f ms | live post->reply p50 %.0f ms p95 %.0f ms",
			k, r.FirstWake.P50, r.FirstWake.P95, r.ReWake.P50, r.ReWake.P95, r.LiveReply.P50, r.LiveReply.P95)
	}
	t.Logf("report: %s", out)
}

type providerBench struct {
	FirstWake latency `json:"first_wake_post_to_turn_start"`
	ReWake    latency `json:"rewake_post_to_turn_start"`
	LiveReply latency `json:"live_post_to_reply"`
}

func benchAgent(t *testing.T, c *client.Client, agent uuid.UUID) providerBench {
	var b providerBench
	var first, again, live []time.Duration
	var rooms []uuid.UUID
	for i := range 10 {
		room, _ := roomWith(t, c, fmt.Sprintf("wake-%s-%d", agent, i), agent)
		m := postText(t, c, room.ID, "wake up")
		awaitReply(t, c, m, 2*time.Minute)
		first = append(first, turnStartedAfter(t, c, room.ID, m))
		rooms = append(rooms, room.ID)
	}
	// Re-wake: each room reaped (idle 2 s), then messaged again.
	for _, room := range rooms[:5] {
		var sessions api.SessionList
		must(t, c.Do(context.Background(), http.MethodGet, "/v1/sessions?room="+room.String(), nil, &sessions))
		awaitPresence(t, c, sessions.Items[0].RuntimeSessionID, domain.PresenceDormant, time.Minute)
		m := postText(t, c, room, "again")
		awaitReply(t, c, m, 2*time.Minute)
		again = append(again, turnStartedAfter(t, c, room, m))
	}
	room := rooms[len(rooms)-1]
	for range 20 {
		m := postText(t, c, room, "ping")
		r := awaitReply(t, c, m, time.Minute)
		live = append(live, r.CreatedAt.Sub(m.CreatedAt))
	}
	b.FirstWake, b.ReWake, b.LiveReply = summarize(first), summarize(again), summarize(live)
	return b
}
