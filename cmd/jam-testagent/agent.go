package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coder/acp-go-sdk"
)

var (
	_ acp.Agent             = (*agent)(nil)
	_ acp.AgentLoader       = (*agent)(nil)
	_ acp.AgentExperimental = (*agent)(nil)
)

// liveSession is a session attached to this connection (new, loaded or
// resumed). The record is the same data that is persisted on disk.
type liveSession struct {
	mu     sync.Mutex
	rec    *sessionRecord
	cancel context.CancelFunc // in-flight turn, so session/close can stop it
	// mcp are the MCP servers the client gave this connection's session.
	mcp []mcpServer
	// room is the room line the client last gave (it sends it when it changes).
	room string
}

// agent implements the ACP agent side; behaviours live in directives.go.
type agent struct {
	cfg      config
	defaults directives // from --directives, applied to every prompt
	out      *lockedWriter
	log      *slog.Logger
	store    *sessionStore
	exit     func(int) // os.Exit; indirection lets in-process tests catch [[crash]]

	conn    *acp.AgentSideConnection
	connSet chan struct{} // closed once conn is set; requests may race the wiring

	mu       sync.Mutex
	sessions map[string]*liveSession
}

func newAgent(cfg config, out *lockedWriter, log *slog.Logger) *agent {
	if cfg.Name == "" {
		cfg.Name = defaultName
	}
	return &agent{
		cfg:      cfg,
		defaults: parseDirectives(cfg.Directives),
		out:      out,
		log:      log,
		store:    newSessionStore(cfg.StateDir),
		exit:     os.Exit,
		connSet:  make(chan struct{}),
		sessions: make(map[string]*liveSession),
	}
}

// setConnection completes the wiring; the connection needs the agent first
// and starts reading immediately, hence the channel handshake in peer.
func (a *agent) setConnection(c *acp.AgentSideConnection) {
	a.conn = c
	close(a.connSet)
}

// peer returns the client connection once it is wired.
func (a *agent) peer() *acp.AgentSideConnection {
	<-a.connSet
	return a.conn
}

func (a *agent) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	caps := acp.SessionCapabilities{Close: &acp.SessionCloseCapabilities{}}
	if !a.cfg.NoResume {
		caps.Resume = &acp.SessionResumeCapabilities{}
	}
	a.log.Info("initialize", "client_protocol", p.ProtocolVersion)
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession:         !a.cfg.NoLoad,
			SessionCapabilities: caps,
			McpCapabilities:     acp.McpCapabilities{Http: !a.cfg.NoHTTPMCP},
		},
		AgentInfo:   &acp.Implementation{Name: a.cfg.Name, Version: version},
		AuthMethods: []acp.AuthMethod{},
	}, nil
}

// Authenticate succeeds trivially: no auth methods are advertised.
func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	id, err := newSessionID()
	if err != nil {
		return acp.NewSessionResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	rec := &sessionRecord{ID: id, Cwd: p.Cwd, CreatedAt: time.Now().UTC(), Turns: []turn{}}
	// Persist before answering so a crash right after still leaves a loadable session.
	if err := a.store.save(rec); err != nil {
		return acp.NewSessionResponse{}, acp.NewInternalError(map[string]any{"error": "persist session: " + err.Error()})
	}
	a.attach(rec).setMCP(p.McpServers)
	a.log.Info("session/new", "session", id, "cwd", p.Cwd, "mcp_servers", len(p.McpServers))
	return acp.NewSessionResponse{SessionId: acp.SessionId(id)}, nil
}

func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	if a.cfg.NoLoad {
		return acp.LoadSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionLoad)
	}
	ls, err := a.reattach(string(p.SessionId))
	if err != nil {
		return acp.LoadSessionResponse{}, err
	}
	ls.setMCP(p.McpServers)
	ls.mu.Lock()
	turns := append([]turn(nil), ls.rec.Turns...)
	ls.mu.Unlock()
	// Replay history so the client can rebuild its transcript.
	for _, t := range turns {
		for _, u := range []acp.SessionUpdate{acp.UpdateUserMessageText(t.Prompt), acp.UpdateAgentMessageText(t.Reply)} {
			if err := a.peer().SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u}); err != nil {
				return acp.LoadSessionResponse{}, err
			}
		}
	}
	a.log.Info("session/load", "session", p.SessionId, "turns", len(turns))
	return acp.LoadSessionResponse{}, nil
}

func (a *agent) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	if a.cfg.NoResume {
		return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
	}
	ls, err := a.reattach(string(p.SessionId))
	if err != nil {
		return acp.ResumeSessionResponse{}, err
	}
	ls.setMCP(p.McpServers)
	a.log.Info("session/resume", "session", p.SessionId)
	return acp.ResumeSessionResponse{}, nil
}

// CloseSession forgets the session in memory; its file stays for later loads.
func (a *agent) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	id := string(p.SessionId)
	if !validSessionID(id) {
		return acp.CloseSessionResponse{}, invalidSessionID(id)
	}
	a.mu.Lock()
	ls := a.sessions[id]
	delete(a.sessions, id)
	a.mu.Unlock()
	if ls == nil {
		return acp.CloseSessionResponse{}, sessionNotFound(id)
	}
	ls.mu.Lock()
	if ls.cancel != nil {
		ls.cancel() // ACP: close implies cancelling ongoing work
	}
	ls.mu.Unlock()
	a.log.Info("session/close", "session", id)
	return acp.CloseSessionResponse{}, nil
}

// Cancel needs no bookkeeping: the SDK already cancels the prompt's context.
func (a *agent) Cancel(ctx context.Context, p acp.CancelNotification) error {
	a.log.Info("session/cancel", "session", p.SessionId)
	return nil
}

func (a *agent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	id := string(p.SessionId)
	if !validSessionID(id) {
		return acp.PromptResponse{}, invalidSessionID(id)
	}
	a.mu.Lock()
	ls := a.sessions[id]
	a.mu.Unlock()
	if ls == nil {
		// Strict on purpose: after a restart clients must load/resume first.
		return acp.PromptResponse{}, sessionNotFound(id)
	}

	text := promptText(p.Prompt)
	d := a.defaults.merge(parseDirectives(text))
	body := promptBody(text)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ls.mu.Lock()
	ls.cancel = cancel
	prior := len(ls.rec.Turns)
	if line := roomLine(text); line != "" {
		ls.room = line
	}
	room := ls.room
	ls.mu.Unlock()

	a.log.Info("session/prompt", "session", id, "directives", d, "body_len", len(body))
	out, err := a.runTurn(ctx, p.SessionId, d, text, body, prior, room)
	if err != nil {
		a.log.Info("turn failed", "session", id, "err", err)
		return acp.PromptResponse{}, err
	}
	if out.stop == acp.StopReasonCancelled {
		a.log.Info("turn cancelled", "session", id)
		return acp.PromptResponse{StopReason: out.stop}, nil
	}

	ls.mu.Lock()
	ls.rec.Turns = append(ls.rec.Turns, turn{Prompt: body, Reply: out.reply})
	err = a.store.save(ls.rec)
	ls.mu.Unlock()
	if err != nil {
		return acp.PromptResponse{}, acp.NewInternalError(map[string]any{"error": "persist turn: " + err.Error()})
	}
	return acp.PromptResponse{StopReason: out.stop, Usage: out.usage}, nil
}

// attach makes rec live on this connection, replacing any earlier copy.
func (a *agent) attach(rec *sessionRecord) *liveSession {
	ls := &liveSession{rec: rec}
	a.mu.Lock()
	a.sessions[rec.ID] = ls
	a.mu.Unlock()
	return ls
}

// reattach returns the live session for id, reading it from disk if this
// process has not seen it (e.g. after a restart).
func (a *agent) reattach(id string) (*liveSession, error) {
	if !validSessionID(id) {
		return nil, invalidSessionID(id)
	}
	a.mu.Lock()
	ls := a.sessions[id]
	a.mu.Unlock()
	if ls != nil {
		return ls, nil
	}
	rec, err := a.store.load(id)
	if errors.Is(err, errSessionNotFound) {
		return nil, sessionNotFound(id)
	}
	if err != nil {
		return nil, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	return a.attach(rec), nil
}

// promptText joins the text blocks; newlines keep envelopes line-aligned
// when a client sends each message as its own block.
func promptText(blocks []acp.ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		if b.Text != nil {
			parts = append(parts, b.Text.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func invalidSessionID(id string) *acp.RequestError {
	return acp.NewInvalidParams(map[string]any{"error": "invalid session id", "sessionId": id})
}

// sessionNotFound uses ACP's "Resource not found" code (-32002).
func sessionNotFound(id string) *acp.RequestError {
	return &acp.RequestError{Code: -32002, Message: "Resource not found", Data: map[string]any{"error": "session not found", "sessionId": id}}
}

// --- Unsupported methods: advertised nowhere, answered with Method not found.

func (a *agent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}

func (a *agent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

func (a *agent) UnstableForkSession(context.Context, acp.UnstableForkSessionRequest) (acp.UnstableForkSessionResponse, error) {
	return acp.UnstableForkSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionFork)
}

func (a *agent) UnstableSetSessionModel(context.Context, acp.UnstableSetSessionModelRequest) (acp.UnstableSetSessionModelResponse, error) {
	return acp.UnstableSetSessionModelResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetModel)
}

func (a *agent) UnstableLogout(context.Context, acp.UnstableLogoutRequest) (acp.UnstableLogoutResponse, error) {
	return acp.UnstableLogoutResponse{}, acp.NewMethodNotFound(acp.AgentMethodLogout)
}

func (a *agent) UnstableCloseNes(context.Context, acp.UnstableCloseNesRequest) (acp.UnstableCloseNesResponse, error) {
	return acp.UnstableCloseNesResponse{}, acp.NewMethodNotFound(acp.AgentMethodNesClose)
}

func (a *agent) UnstableStartNes(context.Context, acp.UnstableStartNesRequest) (acp.UnstableStartNesResponse, error) {
	return acp.UnstableStartNesResponse{}, acp.NewMethodNotFound(acp.AgentMethodNesStart)
}

func (a *agent) UnstableSuggestNes(context.Context, acp.UnstableSuggestNesRequest) (acp.UnstableSuggestNesResponse, error) {
	return acp.UnstableSuggestNesResponse{}, acp.NewMethodNotFound(acp.AgentMethodNesSuggest)
}

func (a *agent) UnstableDisableProviders(context.Context, acp.UnstableDisableProvidersRequest) (acp.UnstableDisableProvidersResponse, error) {
	return acp.UnstableDisableProvidersResponse{}, acp.NewMethodNotFound(acp.AgentMethodProvidersDisable)
}

func (a *agent) UnstableListProviders(context.Context, acp.UnstableListProvidersRequest) (acp.UnstableListProvidersResponse, error) {
	return acp.UnstableListProvidersResponse{}, acp.NewMethodNotFound(acp.AgentMethodProvidersList)
}

func (a *agent) UnstableSetProviders(context.Context, acp.UnstableSetProvidersRequest) (acp.UnstableSetProvidersResponse, error) {
	return acp.UnstableSetProvidersResponse{}, acp.NewMethodNotFound(acp.AgentMethodProvidersSet)
}

// Document/NES notifications are ignored: notifications cannot fail visibly.
func (a *agent) UnstableDidChangeDocument(context.Context, acp.UnstableDidChangeDocumentNotification) error {
	return nil
}

func (a *agent) UnstableDidCloseDocument(context.Context, acp.UnstableDidCloseDocumentNotification) error {
	return nil
}

func (a *agent) UnstableDidFocusDocument(context.Context, acp.UnstableDidFocusDocumentNotification) error {
	return nil
}

func (a *agent) UnstableDidOpenDocument(context.Context, acp.UnstableDidOpenDocumentNotification) error {
	return nil
}

func (a *agent) UnstableDidSaveDocument(context.Context, acp.UnstableDidSaveDocumentNotification) error {
	return nil
}

func (a *agent) UnstableAcceptNes(context.Context, acp.UnstableAcceptNesNotification) error {
	return nil
}

func (a *agent) UnstableRejectNes(context.Context, acp.UnstableRejectNesNotification) error {
	return nil
}

func (ls *liveSession) setMCP(servers []acp.McpServer) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.mcp = mcpServersOf(servers)
}

// mcpServers are the MCP servers of a live session.
func (a *agent) mcpServers(sid acp.SessionId) []mcpServer {
	a.mu.Lock()
	ls := a.sessions[string(sid)]
	a.mu.Unlock()
	if ls == nil {
		return nil
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return append([]mcpServer(nil), ls.mcp...)
}
