package tools

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPServerName is the name Jam's tools are announced under in a provider's MCP config; a
// provider that prefixes tool names (Claude's mcp__jam__…) uses it.
const MCPServerName = "jam"

// MCPPath is the Streamable HTTP endpoint's path.
const MCPPath = "/mcp"

// implementation is how Jam's MCP server and bridge introduce themselves.
var implementation = &mcp.Implementation{Name: MCPServerName, Title: "Jam", Version: "1"}

// MCPServer serves the tool registry over MCP Streamable HTTP to the runtimes of one node.
// Each runtime instance authenticates with its own bearer token, issued when it is prepared
// and revoked when it is torn down or replaced by a newer generation; the token alone
// decides whose tools a request reaches.
type MCPServer struct {
	log     *slog.Logger
	handler http.Handler

	mu      sync.Mutex
	byToken map[string]*mcpEntry // sha256(token) -> entry
	current map[uuid.UUID]string // runtime session -> sha256 of its live token
}

type mcpEntry struct {
	sess *Session
	srv  *mcp.Server
}

// NewMCPServer builds the node's MCP server; mount Handler at MCPPath.
func NewMCPServer(log *slog.Logger) *MCPServer {
	s := &MCPServer{log: log, byToken: map[string]*mcpEntry{}, current: map[uuid.UUID]string{}}
	// Stateless: every request is authenticated and routed by its own token, so no MCP
	// session id can carry one runtime's authority into another's requests. Requests reach
	// the listener through the sandbox's proxy with the guest's Host header, which the
	// token, not the Host check, authenticates.
	s.handler = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if e := s.lookup(r); e != nil {
			return e.srv
		}
		return nil
	}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, DisableLocalhostProtection: true,
		PropagateRequestCancellation: true})
	return s
}

// ServeHTTP refuses a request without a live token, then serves MCP.
func (s *MCPServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.lookup(r) == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="jam"`)
		http.Error(w, "unknown or retired runtime token", http.StatusUnauthorized)
		return
	}
	s.handler.ServeHTTP(w, r)
}

func (s *MCPServer) lookup(r *http.Request) *mcpEntry {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byToken[tokenKey(tok)]
}

func tokenKey(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// Issue mints the token of a runtime instance's session. A token issued earlier for the
// same runtime session (a retired generation) stops working at once.
func (s *MCPServer) Issue(sess *Session) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("mint runtime tool token: %w", err)
	}
	tok := hex.EncodeToString(b)
	srv := mcp.NewServer(implementation, &mcp.ServerOptions{Instructions: "Jam's tools for acting in your chat room."})
	for _, spec := range sess.Specs() {
		name := spec.Name
		srv.AddTool(&mcp.Tool{Name: name, Description: spec.Description, InputSchema: spec.InputSchema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				res := sess.Call(ctx, callIDOf(req.Params.Meta), name, req.Params.Arguments)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text}}, IsError: res.IsError}, nil
			})
	}
	key := tokenKey(tok)
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.current[sess.id.RuntimeSession]; ok {
		if e := s.byToken[prev]; e != nil && e.sess.id.Generation > sess.id.Generation {
			// A late attempt of an older prepare must not unseat its successor.
			return "", fmt.Errorf("%w: generation %d, live %d", ErrRetired, sess.id.Generation, e.sess.id.Generation)
		}
		delete(s.byToken, prev)
	}
	s.byToken[key] = &mcpEntry{sess: sess, srv: srv}
	s.current[sess.id.RuntimeSession] = key
	return tok, nil
}

// Revoke ends the token of a runtime session's instance of generation gen (0: whichever is
// live). A newer generation's token is left alone.
func (s *MCPServer) Revoke(session uuid.UUID, gen int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key, ok := s.current[session]
	if !ok {
		return
	}
	if e := s.byToken[key]; e != nil && gen != 0 && e.sess.id.Generation != gen {
		return
	}
	delete(s.byToken, key)
	delete(s.current, session)
}

// Live is how many runtime tokens are valid (for tests and status).
func (s *MCPServer) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byToken)
}

// callIDMetaKeys are where MCP clients put the provider's own id of a tool call; a retried
// call carries the same one.
var callIDMetaKeys = []string{"jam/call_id", "claudecode/toolUseId", "toolCallId", "callId", "tool_call_id"}

func callIDOf(meta mcp.Meta) string {
	for _, k := range callIDMetaKeys {
		switch v := meta[k].(type) {
		case string:
			if v != "" {
				return v
			}
		case json.Number:
			return v.String()
		}
	}
	return ""
}
