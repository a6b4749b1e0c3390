// Package stubmodel is a scripted model server on 127.0.0.1 for driving the real agent CLIs
// offline: it answers the model dialects they speak over server-sent events, lets a test
// decide each answer (text, a tool call, a slow stream, a failure), and records every
// request so a test can assert what the agent sent. Today it speaks OpenAI Chat Completions
// (`POST /v1/chat/completions`, OpenCode and other OpenAI-compatible clients) and
// `GET /v1/models`.
package stubmodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Dialect names the API a request arrived on.
type Dialect string

const (
	DialectChat Dialect = "chat_completions"
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
	At          time.Time
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
