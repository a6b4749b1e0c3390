package codex

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jam-dev/jam/internal/provider"
)

// askingTools is a ToolCaller whose asks a human answers (or not).
type askingTools struct {
	asked  []string
	answer string
	ok     bool
}

func (a *askingTools) Specs() []provider.ToolSpec { return nil }
func (a *askingTools) Call(context.Context, string, string, json.RawMessage) provider.ToolResult {
	return provider.ToolResult{}
}
func (a *askingTools) AskQuestion(_ context.Context, q string) (string, bool, error) {
	a.asked = append(a.asked, q)
	return a.answer, a.ok, nil
}

func TestRequestUserInputIsAskedThroughTheQuestionBroker(t *testing.T) {
	t.Parallel()
	tools := &askingTools{answer: "the blue one", ok: true}
	rt, err := New(provider.Spec{Executable: "/bin/true", Dir: t.TempDir(), Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	r := rt.(*Runtime)
	r.turn = &turnState{TurnCore: &provider.TurnCore{Ctx: context.Background()}}
	raw := json.RawMessage(`{"threadId":"t","turnId":"u","itemId":"i","isBlocking":true,"questions":[
		{"id":"q1","header":"Colour","question":"Which one?","options":[{"label":"blue","description":"calm"},{"label":"red","description":""}]},
		{"id":"q2","header":"Key","question":"Your token?","isSecret":true}]}`)
	got, _ := json.Marshal(r.userInput(raw))
	want := `{"answers":{"q1":{"answers":["the blue one"]},"q2":{"answers":[]}}}`
	if string(got) != want {
		t.Fatalf("answers %s, want %s", got, want)
	}
	if len(tools.asked) != 1 || !strings.Contains(tools.asked[0], "Colour: Which one?") || !strings.Contains(tools.asked[0], "- blue (calm)") {
		t.Fatalf("asked %q (a secret must never be asked in the room)", tools.asked)
	}
	// No answer before the deadline: Codex proceeds without one.
	tools.ok = false
	got, _ = json.Marshal(r.userInput(raw))
	if string(got) != `{"answers":{"q1":{"answers":[]},"q2":{"answers":[]}}}` {
		t.Fatalf("unanswered %s", got)
	}
}
