package providertest

import (
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
)

// The markers a scenario puts in a message for the scripted model; a message without one is
// answered with jam_reply_to_message.
const (
	// markRetry: the reply is called twice under one call id.
	markRetry = "[[retry]]"
	// markSteer: the answer streams slowly before its reply call, so a steer lands mid-turn.
	markSteer = "[[steer]]"
	// markWedge: the answer streams for a minute and is never finished (interrupt, kill).
	markWedge = "[[wedge]]"
	// markPermission: the model first runs the CLI's shell tool, which needs permission.
	markPermission = "[[permission]]"
)

var jamID = regexp.MustCompile(`id=([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})`)

// script is a lane's scripted model. It answers the oldest Jam message of the conversation
// that no tool call answered yet (messages of a turn that was cut are abandoned), one call
// per request, as the markers in that message's block ask.
type script struct {
	a   adapter
	dir string

	mu        sync.Mutex
	abandoned map[string]bool
	retried   map[string]int
	streamed  map[string]bool
}

func newScript(a adapter, dir string) *script {
	return &script{a: a, dir: dir, abandoned: map[string]bool{}, retried: map[string]int{}, streamed: map[string]bool{}}
}

// deniedFile is the file the permission scenario's command would create for message id.
func (s *script) deniedFile(id string) string { return filepath.Join(s.dir, "denied-"+id[:8]) }

// retryCallID is the one call id of the retry scenario's two calls.
func retryCallID(id string) string { return "call_retry_" + id[:8] }

func (s *script) respond(r stubmodel.Request) stubmodel.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, block := s.pending(r)
	reply := r.ToolName(domain.ToolReplyToMessage)
	if id == "" {
		if r.AfterToolResult {
			return stubmodel.Reply{Text: "Replied."}
		}
		return stubmodel.Echo(r)
	}
	answer := func(text string) *stubmodel.ToolCall {
		return &stubmodel.ToolCall{Name: reply, Arguments: map[string]string{"message_id": id, "text": text}}
	}
	switch {
	case reply == "":
		// A side request without Jam's tools (OpenCode titles its sessions first): it must
		// not abandon the message the turn's own request is about to wedge on.
		return stubmodel.Echo(r)
	case strings.Contains(block, markWedge):
		s.abandoned[id] = true
		return stubmodel.Reply{Text: strings.Repeat("working ", 60), Chunks: 60, ChunkDelay: time.Second}
	case strings.Contains(block, markPermission) && s.a.shell != nil && !calledWith(r, s.deniedFile(id)):
		return stubmodel.Reply{ToolCall: s.a.shell(r, "touch "+s.deniedFile(id))}
	case strings.Contains(block, markRetry):
		s.retried[id]++
		call := answer("stub: " + body(block))
		call.ID = retryCallID(id)
		return stubmodel.Reply{ToolCall: call}
	case strings.Contains(block, markSteer) && !s.streamed[id]:
		s.streamed[id] = true
		return stubmodel.Reply{Text: "thinking it over", Chunks: 8, ChunkDelay: 300 * time.Millisecond,
			ToolCall: answer("stub: " + body(block))}
	}
	return stubmodel.Reply{ToolCall: answer("stub: " + body(block))}
}

// pending is the oldest Jam message in the conversation's user messages that is neither
// answered by a tool call nor abandoned, with its envelope block.
func (s *script) pending(r stubmodel.Request) (id, block string) {
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		for _, match := range jamID.FindAllStringSubmatchIndex(m.Text, -1) {
			candidate := m.Text[match[2]:match[3]]
			b := blockOf(m.Text, match[0])
			if s.abandoned[candidate] {
				continue
			}
			done := calledWith(r, candidate)
			if strings.Contains(b, markRetry) {
				done = s.retried[candidate] >= 2
			}
			if !done {
				return candidate, b
			}
		}
	}
	return "", ""
}

// calledWith reports whether an earlier tool call of the conversation names text.
func calledWith(r stubmodel.Request, text string) bool {
	for _, c := range r.ToolCalls {
		if strings.Contains(c, text) || strings.Contains(c, strings.ReplaceAll(text, "/", `\/`)) {
			return true
		}
	}
	return false
}

// blockOf is the envelope block starting at the header holding offset at: up to its
// [end message] or the next block.
func blockOf(text string, at int) string {
	rest := text[at:]
	if end := strings.Index(rest, "[end message]"); end >= 0 {
		rest = rest[:end]
	}
	if next := strings.Index(rest[1:], "[message "); next >= 0 {
		rest = rest[:next+1]
	}
	return rest
}

// body is the first line of a block's message text, without the suite's markers.
func body(block string) string {
	_, rest, _ := strings.Cut(block, "\n")
	for _, m := range []string{markRetry, markSteer, markWedge, markPermission} {
		rest = strings.ReplaceAll(rest, m, "")
	}
	first, _, _ := strings.Cut(strings.TrimSpace(rest), "\n")
	return strings.TrimSpace(first)
}
