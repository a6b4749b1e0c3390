// Package stubmodel is a scripted model server on 127.0.0.1 for driving the real agent CLIs
// offline: it answers the model dialects they speak over server-sent events, lets a test
// decide each answer (text, a tool call, a slow stream, a failure), and records every
// request so a test can assert what the agent sent. It speaks OpenAI Responses
// (`POST /v1/responses`, Codex), Chat Completions (`POST /v1/chat/completions`, OpenCode and
// other OpenAI-compatible clients), Anthropic Messages (`POST /v1/messages`, any query
// string, Claude Code) and `GET /v1/models`.
package stubmodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Dialect names the API a request arrived on.
type Dialect string

const (
	DialectChat      Dialect = "chat_completions"
	DialectResponses Dialect = "responses"
	DialectMessages  Dialect = "messages"
)

// Model is the id the server lists and answers as.
const Model = "stub-model"

// maxBody bounds a request body the server reads.
const maxBody = 16 << 20

// Failure is a scripted error answer instead of a stream.
type Failure string

const (
	// FailOverloaded answers 529/503 style "overloaded": clients retry it.
	FailOverloaded Failure = "overloaded"
	// FailContextLength answers 400 "context length exceeded": clients do not retry it.
	FailContextLength Failure = "context_length"
)

// Reply is one scripted answer.
type Reply struct {
	// Text is streamed as the assistant's message (in Chunks pieces).
	Text string
	// ToolCall, when set, makes the answer a call of that tool (after Text, if any).
	ToolCall *ToolCall
	// Chunks is how many deltas Text is split into (default 3); ChunkDelay is the pause
	// before each (a slow stream a test can steer or interrupt).
	Chunks     int
	ChunkDelay time.Duration
	// Fail answers with an error instead.
	Fail Failure
}

// ToolCall is a scripted call of a named tool.
type ToolCall struct {
	Name      string
	Arguments any
	// ID, when set, is the call's id instead of one made from the request's number: a test
	// scripts the same id in two answers to play a model (or a client) retrying one call.
	ID string
}

// callID is the call's id: the scripted one, else prefix and the request's number.
func (c ToolCall) callID(prefix, n string) string {
	if c.ID != "" {
		return c.ID
	}
	return prefix + n
}

// Request is one recorded request.
type Request struct {
	Dialect Dialect
	Path    string
	Body    json.RawMessage
	// Messages are the conversation the agent sent, flattened to role and text.
	Messages []Message
	// Tools are the names of the tools the agent offered.
	Tools []string
	// ToolResults are the outputs of earlier tool calls the agent sent back.
	ToolResults []string
	// ToolCalls are the arguments (JSON) of the tool calls earlier in the conversation.
	ToolCalls []string
	// AfterToolResult: the conversation ends with a tool's output (the agent continues a
	// turn after a call), not with a new user message.
	AfterToolResult bool
	At              time.Time
}

// Offers reports whether the agent offered a tool whose name ends with name (agents prefix
// MCP tools with their server: Claude Code's mcp__jam__jam_reply_to_message, OpenCode's
// jam_jam_reply_to_message).
func (r Request) Offers(name string) bool {
	for _, t := range r.Tools {
		if t == name || strings.HasSuffix(t, "__"+name) || strings.HasSuffix(t, "_"+name) {
			return true
		}
	}
	return false
}

// ToolName is the offered tool whose name ends with name ("" when not offered).
func (r Request) ToolName(name string) string {
	for _, t := range r.Tools {
		if t == name || strings.HasSuffix(t, "__"+name) || strings.HasSuffix(t, "_"+name) {
			return t
		}
	}
	return ""
}

// Message is one conversation entry of a request, its content flattened to text.
type Message struct {
	Role string
	Text string
}

// LastUser is the text of the request's last user message.
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Text
		}
	}
	return ""
}

// AllText is every message's text, for "did the agent send the earlier turns" assertions.
func (r Request) AllText() string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// Responder decides the answer to a request.
type Responder func(Request) Reply

// messageIDPattern finds the message ids Jam's envelopes carry ("id=<uuid>").
var messageIDPattern = regexp.MustCompile(`id=([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})`)

// MessageIDs lists the Jam message ids in the request's last user message, in order.
func (r Request) MessageIDs() []string { return idsIn(r.LastUser()) }

func idsIn(text string) []string {
	var out []string
	for _, m := range messageIDPattern.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// Unanswered is the first Jam message id in the conversation's user messages that no
// earlier tool call names, with the user message that holds it ("" when every one was).
func (r Request) Unanswered() (id, prompt string) {
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		for _, candidate := range idsIn(m.Text) {
			answered := false
			for _, c := range r.ToolCalls {
				answered = answered || strings.Contains(c, candidate)
			}
			if !answered {
				return candidate, m.Text
			}
		}
	}
	return "", ""
}

// ReplyTool answers like a disposition-capable agent: each Jam message no tool call has
// answered yet gets jam_reply_to_message {message_id, text: "stub: <its first line>"}, one
// per request (messages steered into a turn included); with none left it ends the turn with
// a short final text. Without the tool it echoes.
func ReplyTool(r Request) Reply {
	tool := r.ToolName("jam_reply_to_message")
	if tool == "" {
		return Echo(r)
	}
	id, prompt := r.Unanswered()
	if id == "" {
		if r.AfterToolResult {
			return Reply{Text: "Replied."}
		}
		return Echo(r)
	}
	return Reply{ToolCall: &ToolCall{Name: tool, Arguments: map[string]string{
		"message_id": id, "text": "stub: " + messageBody(prompt, id)}}}
}

// messageBody is the first line of the body of the envelope block of message id.
func messageBody(prompt, id string) string {
	i := strings.Index(prompt, "id="+id)
	if i < 0 {
		return ""
	}
	rest := prompt[i:]
	if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
		rest = rest[nl+1:]
	}
	first, _, _ := strings.Cut(rest, "\n")
	return strings.TrimSpace(first)
}

// Echo answers every request with "stub: " and the last user message's first line.
func Echo(r Request) Reply {
	first, _, _ := strings.Cut(strings.TrimSpace(r.LastUser()), "\n")
	return Reply{Text: "stub: " + first}
}

// Server is a running stub model server.
type Server struct {
	// URL is the base URL ("http://127.0.0.1:PORT"); clients use URL+"/v1".
	URL string

	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	respond  Responder
	queue    []Reply
	requests []Request
	nextID   int
}

// Start serves on 127.0.0.1:0 until Close. respond decides every answer not queued with
// Enqueue; nil is Echo.
func Start(respond Responder) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("stub model server: %w", err)
	}
	if respond == nil {
		respond = Echo
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln, respond: respond}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("POST /v1/responses", s.responses)
	mux.HandleFunc("POST /v1/messages", s.messages)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Enqueue scripts the next answers, in order; once they are used, the responder answers.
func (s *Server) Enqueue(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, r...)
}

// SetResponder replaces the responder.
func (s *Server) SetResponder(r Responder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = r
}

// Requests returns every request so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// record keeps the request and picks its answer.
func (s *Server) record(r Request) (Reply, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.At = time.Now()
	s.requests = append(s.requests, r)
	s.nextID++
	if len(s.queue) > 0 {
		next := s.queue[0]
		s.queue = s.queue[1:]
		return next, fmt.Sprint(s.nextID)
	}
	return s.respond(r), fmt.Sprint(s.nextID)
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list",
		"data": []map[string]any{{"id": Model, "object": "model", "created": 0, "owned_by": "stub"}}})
}

// chunks splits text into n roughly equal pieces (at least one, none empty unless text is).
func chunks(text string, n int) []string {
	if n <= 0 {
		n = 3
	}
	runes := []rune(text)
	if len(runes) == 0 {
		return nil
	}
	if n > len(runes) {
		n = len(runes)
	}
	out := make([]string, 0, n)
	size := (len(runes) + n - 1) / n
	for i := 0; i < len(runes); i += size {
		out = append(out, string(runes[i:min(i+size, len(runes))]))
	}
	return out
}

// sse writes server-sent events, flushing each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event; name "" writes a data-only event. data is JSON-encoded unless it
// is a string.
func (e *sse) event(name string, data any) {
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	switch d := data.(type) {
	case string:
		fmt.Fprintf(e.w, "data: %s\n\n", d)
	default:
		b, _ := json.Marshal(d)
		fmt.Fprintf(e.w, "data: %s\n\n", b)
	}
	if e.f != nil {
		e.f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func readBody(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, maxBody))
}

// arguments is a tool call's arguments as the JSON string the dialects carry.
func (c ToolCall) arguments() string {
	if s, ok := c.Arguments.(string); ok {
		return s
	}
	b, _ := json.Marshal(c.Arguments)
	return string(b)
}

// textOf flattens a message content that is a string or a list of typed parts.
func textOf(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Text != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
