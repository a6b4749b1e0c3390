// Package tools is Jam's one runtime tool registry: each tool a name, a JSON schema, the
// scopes it needs and a handler that runs with the calling runtime instance's identity and
// nothing else. The same registry reaches every adapter: Codex as dynamic tools, ACP and
// Claude Code over MCP (mcp.go), and `jam mcp` bridges it to stdio.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// Identity is the runtime instance a call comes from, established by its token or by the
// adapter that owns it — never by the model: no tool takes an agent, room or session
// selector as an argument.
type Identity struct {
	AgentID        uuid.UUID
	RoomID         uuid.UUID
	RuntimeSession uuid.UUID
	// Generation is the runtime instance generation; a retired one is fenced out.
	Generation int64
}

// Call is one tool call as a handler sees it.
type Call struct {
	Identity
	// Tool is the called tool's name.
	Tool string
	// ID is the provider's call id ("" when it has none).
	ID   string
	Args json.RawMessage
	// Stager stages settlement dispositions in the instance's running turn (nil before the
	// runtime is bound).
	Stager  provider.DispositionStager
	Backend Backend
}

// Handler runs one call. An error is a refusal the model sees as the tool's error result
// (its text must be fit for the model: no internal detail).
type Handler func(ctx context.Context, c Call) (string, error)

// Tool is one registered tool.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
	Scopes      []domain.ToolScope
	Handle      Handler
}

// Spec is the tool's model-facing description.
func (t Tool) Spec() provider.ToolSpec {
	return provider.ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
}

// Registry is an immutable list of tools.
type Registry struct {
	tools []Tool
}

var toolName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// New builds a registry, refusing an empty or malformed name, a duplicate (a later tool must
// not shadow an earlier one), a schema that is not a JSON object schema, an unknown scope
// and a tool without a handler.
func New(tools ...Tool) (*Registry, error) {
	seen := map[string]bool{}
	for _, t := range tools {
		if !toolName.MatchString(t.Name) {
			return nil, fmt.Errorf("tool name %q: must be 1-64 lower-case letters, digits or '_'", t.Name)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("tool %s is registered twice", t.Name)
		}
		seen[t.Name] = true
		var schema struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil || schema.Type != "object" {
			return nil, fmt.Errorf("tool %s: input schema must be a JSON object schema", t.Name)
		}
		for _, sc := range t.Scopes {
			if !domain.ToolScopes.Has(sc) {
				return nil, fmt.Errorf("tool %s: unknown scope %q", t.Name, sc)
			}
		}
		if t.Handle == nil {
			return nil, fmt.Errorf("tool %s has no handler", t.Name)
		}
	}
	return &Registry{tools: slices.Clone(tools)}, nil
}

// Tools lists the registered tools in order.
func (r *Registry) Tools() []Tool { return slices.Clone(r.tools) }

func (r *Registry) lookup(name string) (Tool, bool) {
	for _, t := range r.tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// maxReplayed bounds the call answers a session remembers for retried call ids.
const maxReplayed = 256

// Session is the registry bound to one runtime instance: its identity, the scopes it was
// granted, the backend its handlers use, and the replay cache of its calls. It implements
// provider.ToolCaller.
type Session struct {
	reg     *Registry
	id      Identity
	scopes  map[domain.ToolScope]bool
	backend Backend

	mu     sync.Mutex
	stager provider.DispositionStager
	calls  map[string]*replayed
	order  []string
}

// replayed is one call id's call: done is closed once res holds its answer, so a retry
// that arrives while the first call still runs waits for it instead of running again.
type replayed struct {
	name string
	args []byte
	done chan struct{}
	res  provider.ToolResult
	// forgotten: the call failed passingly and was dropped; a waiting retry runs it again.
	forgotten bool
}

var _ provider.ToolCaller = (*Session)(nil)

// Session binds the registry to a runtime instance with the given scopes. backend may be
// nil for a session that only settles (its calls are then not fenced by the store; the
// turn's commit is).
func (r *Registry) Session(id Identity, backend Backend, scopes ...domain.ToolScope) *Session {
	s := &Session{reg: r, id: id, backend: backend, scopes: map[domain.ToolScope]bool{}, calls: map[string]*replayed{}}
	for _, sc := range scopes {
		s.scopes[sc] = true
	}
	return s
}

// Identity is the instance the session serves.
func (s *Session) Identity() Identity { return s.id }

// Bind attaches the runtime whose running turn the settlement tools stage into.
func (s *Session) Bind(st provider.DispositionStager) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stager = st
}

// Specs are the tools the session may call: those whose every scope it was granted.
func (s *Session) Specs() []provider.ToolSpec {
	var out []provider.ToolSpec
	for _, t := range s.reg.tools {
		if s.granted(t) {
			out = append(out, t.Spec())
		}
	}
	return out
}

// Has reports whether the session may call the named tool.
func (s *Session) Has(name string) bool {
	t, ok := s.reg.lookup(name)
	return ok && s.granted(t)
}

func (s *Session) granted(t Tool) bool {
	for _, sc := range t.Scopes {
		if !s.scopes[sc] {
			return false
		}
	}
	return true
}

// Call runs one call. A call id seen before is answered with its first result (a retry
// that arrives while the first call still runs waits for it); the same id with another
// tool or other arguments is refused rather than run again. A call that failed only
// passingly (cancelled, or Jam could not reach its store) is forgotten, so its retry runs.
func (s *Session) Call(ctx context.Context, callID, name string, args json.RawMessage) provider.ToolResult {
	norm := normalize(args)
	if callID == "" {
		res, _ := s.run(ctx, callID, name, norm)
		return res
	}
	for {
		s.mu.Lock()
		prev, ok := s.calls[callID]
		if !ok {
			cur := &replayed{name: name, args: norm, done: make(chan struct{})}
			s.remember(callID, cur)
			s.mu.Unlock()
			res, keep := s.run(ctx, callID, name, norm)
			s.mu.Lock()
			cur.res = res
			if !keep {
				s.forget(callID, cur)
			}
			s.mu.Unlock()
			close(cur.done)
			return res
		}
		s.mu.Unlock()
		if prev.name != name || !bytes.Equal(prev.args, norm) {
			return provider.ToolResult{Text: "Refused: this call id was already used for another call.", IsError: true}
		}
		select {
		case <-prev.done:
		case <-ctx.Done():
			return refusal(ctx.Err())
		}
		s.mu.Lock()
		forgotten := prev.forgotten
		s.mu.Unlock()
		if !forgotten {
			return prev.res
		}
	}
}

// remember records an in-flight call; s.mu is held.
func (s *Session) remember(id string, r *replayed) {
	if len(s.order) >= maxReplayed {
		delete(s.calls, s.order[0])
		s.order = s.order[1:]
	}
	s.calls[id] = r
	s.order = append(s.order, id)
}

// forget drops a call whose failure should not be replayed; s.mu is held.
func (s *Session) forget(id string, r *replayed) {
	r.forgotten = true
	if s.calls[id] != r {
		return
	}
	delete(s.calls, id)
	if i := slices.Index(s.order, id); i >= 0 {
		s.order = slices.Delete(s.order, i, i+1)
	}
}

// run calls the tool; keep reports whether its answer is final (a success, a refusal the
// model must see again on retry) rather than a passing failure worth running again.
func (s *Session) run(ctx context.Context, callID, name string, args json.RawMessage) (res provider.ToolResult, keep bool) {
	t, ok := s.reg.lookup(name)
	if !ok || !s.granted(t) {
		return provider.ToolResult{Text: fmt.Sprintf("Unknown tool %q.", domain.Truncate(name, 100)), IsError: true}, true
	}
	if s.backend != nil {
		if err := s.backend.Current(ctx, s.id); err != nil {
			return refusal(err), isFinal(err)
		}
	} else if slices.ContainsFunc(t.Scopes, func(sc domain.ToolScope) bool { return sc != domain.ScopeSettle }) {
		// A session without a backend (an adapter's own settlement-only session) can only
		// stage dispositions.
		return provider.ToolResult{Text: fmt.Sprintf("Unknown tool %q.", domain.Truncate(name, 100)), IsError: true}, true
	}
	s.mu.Lock()
	st := s.stager
	s.mu.Unlock()
	text, err := t.Handle(ctx, Call{Identity: s.id, Tool: name, ID: callID, Args: args, Stager: st, Backend: s.backend})
	if err != nil {
		return refusal(err), isFinal(err)
	}
	return provider.ToolResult{Text: text}, true
}

// isFinal: a refusal or a retired instance answers the same on every retry; anything else
// (a cancelled call, a store Jam could not reach) may succeed when retried.
func isFinal(err error) bool {
	var r *Refusal
	return errors.As(err, &r) || errors.Is(err, ErrRetired)
}

// Refusal is an error whose text the model may see.
type Refusal struct{ Text string }

func (r *Refusal) Error() string { return r.Text }

// refuse is a model-facing refusal.
func refuse(format string, a ...any) error { return &Refusal{Text: fmt.Sprintf(format, a...)} }

// ErrRetired: the calling instance's generation is no longer its session's current one.
var ErrRetired = errors.New("this runtime instance was retired")

// refusal is the result of a failed call: a Refusal's own text, a fixed sentence otherwise
// (internal error text never reaches the model).
func refusal(err error) provider.ToolResult {
	var r *Refusal
	switch {
	case errors.As(err, &r):
		return provider.ToolResult{Text: r.Text, IsError: true}
	case errors.Is(err, ErrRetired):
		return provider.ToolResult{Text: "Refused: this runtime instance was retired; its tools no longer act.", IsError: true}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return provider.ToolResult{Text: "The call was cancelled.", IsError: true}
	}
	return provider.ToolResult{Text: "Jam could not complete the call; try again later.", IsError: true}
}

// normalize compacts JSON arguments so a retry with other whitespace is the same call.
func normalize(args json.RawMessage) []byte {
	if len(bytes.TrimSpace(args)) == 0 {
		return []byte("{}")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, args); err != nil {
		return slices.Clone(args)
	}
	return b.Bytes()
}

var _ provider.QuestionAsker = (*Session)(nil)

// AskQuestion is the question broker behind a provider's native ask, with the same scope
// and fence as jam_ask_question.
func (s *Session) AskQuestion(ctx context.Context, question string) (string, bool, error) {
	if !s.scopes[domain.ScopeAsk] || s.backend == nil {
		return "", false, refuse("this runtime may not ask questions")
	}
	if err := s.backend.Current(ctx, s.id); err != nil {
		return "", false, err
	}
	ans, err := s.backend.Ask(ctx, s.id, QuestionRequest{Text: domain.Truncate(question, domain.MaxQuestionText)})
	if err != nil {
		return "", false, err
	}
	return ans.Text, ans.State == domain.QuestionAnswered, nil
}
