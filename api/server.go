// Package api is Jam's REST control API (Gin, under /v1). Handlers return errors; one
// adapter maps them to the JSON error shape, and a 500 never carries internal text.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/gin-gonic/gin"
	"go.temporal.io/sdk/client"

	"github.com/jam-dev/jam/internal/band"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/lifecycle"
	"github.com/jam-dev/jam/internal/store"
)

// Config is what the API serves from.
type Config struct {
	Store    *store.Store
	Temporal client.Client
	Band     band.Band
	// Lifecycle is told about run intent and agent deletion (membership goes through Band).
	Lifecycle lifecycle.Starter
	// Sessions queries and controls RoomSession workflows; nil reports presence unknown and
	// refuses session control.
	Sessions SessionControl
	// Hosts queries and controls RuntimeHost workflows; nil refuses host control.
	Hosts HostControl
	// TemporalUI is the Temporal Web UI's base URL for workflow links ("" = no links);
	// Namespace is the Temporal namespace the workflows run in.
	TemporalUI string
	Namespace  string
	// Token is the operator's bearer token.
	Token   string
	Version string
	Logger  *slog.Logger
}

// Server is the API's handler set.
type Server struct {
	cfg    Config
	log    *slog.Logger
	engine *gin.Engine
	// watch, when set (WatchOperations), is the lifetime of the operation watchers.
	watch context.Context
	// searchAttrsOK: the namespace was seen with Jam's search attributes.
	searchAttrsOK atomic.Bool
}

func init() { gin.SetMode(gin.ReleaseMode) }

// New builds the router.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Temporal == nil || cfg.Band == nil || cfg.Lifecycle == nil || cfg.Logger == nil {
		return nil, errors.New("api: store, temporal client, band, lifecycle and logger are required")
	}
	if cfg.Token == "" {
		return nil, errors.New("api: an operator token is required")
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.ContextWithFallback = true
	e.Use(withRequestID, s.accessLog, s.recovery)
	e.NoRoute(s.handler(func(*gin.Context) error {
		return &Error{Status: http.StatusNotFound, Code: domain.CodeNotFound, Message: "no such route"}
	}))
	e.NoMethod(s.handler(func(*gin.Context) error {
		return &Error{Status: http.StatusMethodNotAllowed, Code: domain.CodeMethodNotAllowed, Message: "method not allowed on this route"}
	}))

	e.GET("/healthz", s.handler(s.healthz))
	e.GET("/readyz", s.handler(s.readyz))
	// Probes and load balancers often ask with HEAD: the same answer without the body.
	e.HEAD("/healthz", withoutBody, s.handler(s.healthz))
	e.HEAD("/readyz", withoutBody, s.handler(s.readyz))
	e.GET("/v1/openapi.json", s.handler(s.openAPI))

	op := e.Group("/v1", s.requireOperator)
	op.GET("/nodes", s.handler(s.listNodes))
	op.GET("/nodes/:name", s.handler(s.getNode))
	op.POST("/nodes/:name/probe", s.handler(s.probeNode))
	op.POST("/nodes/:name/drain", s.handler(s.drainNode(true)))
	op.POST("/nodes/:name/undrain", s.handler(s.drainNode(false)))
	op.GET("/sandbox/support", s.handler(s.sandboxSupport))
	op.GET("/sandbox/inventory", s.handler(s.sandboxInventory))
	op.GET("/hosts", s.handler(s.listHosts))
	op.GET("/hosts/:id", s.handler(s.getHost))
	op.POST("/hosts/:id/control", s.handler(s.controlHost))
	op.POST("/hosts/:id/discard-unsaved", s.handler(s.discardUnsaved))
	op.GET("/hosts/:id/checkpoints", s.handler(s.listCheckpoints))
	op.POST("/hosts/:id/checkpoints", s.handler(s.createCheckpoint))
	op.POST("/hosts/:id/checkpoints/:checkpoint/delete-payload", s.handler(s.deleteCheckpointPayload))
	op.GET("/hosts/:id/continuity", s.handler(s.hostContinuity))
	op.GET("/hosts/:id/network", s.handler(s.hostNetwork))
	op.POST("/hosts/:id/continuity/start-fresh", s.handler(s.startFresh))
	op.GET("/hosts/:id/cleanup", s.handler(s.inspectHostCleanup))
	op.POST("/hosts/:id/cleanup", s.handler(s.cleanupHost))
	op.GET("/operations/:id", s.handler(s.getOperation))
	op.GET("/workspaces", s.handler(s.listWorkspaces))
	op.GET("/workspaces/:id", s.handler(s.getWorkspace))
	op.GET("/workspaces/:id/removal", s.handler(s.inspectRemoval))
	op.GET("/workspaces/:id/github", s.handler(s.githubReadiness))
	op.GET("/workspaces/:id/operations/:op", s.handler(s.getWorkspaceOperation))
	op.POST("/workspaces/:id/archive", s.handler(s.workspaceOp(domain.WorkspaceActionArchive)))
	op.POST("/workspaces/:id/export", s.handler(s.workspaceOp(domain.WorkspaceActionExport)))
	op.POST("/workspaces/:id/restore", s.handler(s.workspaceOp(domain.WorkspaceActionRestore)))
	op.POST("/workspaces/:id/reconcile", s.handler(s.workspaceOp(domain.WorkspaceActionRetryReconcile)))
	op.POST("/workspaces/:id/exports/:export/delete", s.handler(s.workspaceOp(domain.WorkspaceActionDeleteExport)))
	op.POST("/workspaces/:id/repositories/:action", s.handler(s.repositoryOp))
	op.GET("/settings", s.handler(s.listSettings))
	op.GET("/settings/:key", s.handler(s.getSetting))
	op.PUT("/settings/:key", s.handler(s.putSetting))

	op.POST("/agents", s.handler(s.createAgent))
	op.GET("/agents", s.handler(s.listAgents))
	op.GET("/agents/:id", s.handler(s.getAgent))
	op.PATCH("/agents/:id", s.handler(s.patchAgent))
	op.DELETE("/agents/:id", s.handler(s.deleteAgent))
	op.POST("/agents/:id/stop", s.handler(s.runIntent(domain.RunIntentStopped, false)))
	op.POST("/agents/:id/start", s.handler(s.runIntent(domain.RunIntentRunning, false)))
	op.POST("/agents/:id/restart", s.handler(s.runIntent(domain.RunIntentRunning, true)))
	op.POST("/agents/:id/templates", s.handler(s.createTemplate))
	op.GET("/agents/:id/templates", s.handler(s.listTemplates))
	op.GET("/templates/:id", s.handler(s.getTemplate))
	op.PUT("/templates/:id", s.handler(s.saveTemplate))

	op.POST("/rooms", s.handler(s.createRoom))
	op.GET("/rooms", s.handler(s.listRooms))
	op.GET("/rooms/:id", s.handler(s.getRoom))
	op.POST("/rooms/:id/participants", s.handler(s.addParticipant))
	op.DELETE("/rooms/:id/participants/:participant_id", s.handler(s.removeParticipant))
	op.GET("/rooms/:id/messages", s.handler(s.listMessages))
	op.GET("/events", s.handler(s.streamEvents))
	op.GET("/sessions", s.handler(s.listSessions))
	op.GET("/sessions/:id", s.handler(s.getSession))
	op.POST("/sessions/:id/stop", s.handler(s.stopSession))
	op.POST("/sessions/:id/restart", s.handler(s.restartSession))
	op.POST("/sessions/:id/reset-sandbox", s.handler(s.resetSessionSandbox))
	op.GET("/sessions/:id/continuity", s.handler(s.sessionContinuity))
	op.POST("/sessions/:id/start-fresh", s.handler(s.startSessionFresh))
	op.GET("/permissions", s.handler(s.listPermissions))
	op.GET("/permissions/:id", s.handler(s.getPermission))
	op.POST("/permissions/:id/decision", s.handler(s.decidePermission))
	op.GET("/questions", s.handler(s.listQuestions))
	op.GET("/questions/:id", s.handler(s.getQuestion))
	op.GET("/ops/workflows", s.handler(s.findWorkflows))
	op.GET("/ops/workflows/:workflow", s.handler(s.describeWorkflow))
	op.POST("/ops/workflows/:workflow/retry", s.handler(s.retryWorkflow))
	op.POST("/ops/workflows/:workflow/terminate", s.handler(s.terminateWorkflow))
	op.POST("/ops/sessions/:id/inbound", s.handler(s.signalInbound))
	op.GET("/ops/reconcile", s.handler(s.reconcileStatus))
	op.POST("/questions/:id/answer", s.handler(s.answerQuestion))

	// Routes an attached agent reaches with its own key (posting also with the operator's).
	agentOrOp := e.Group("/v1", s.requireAnyone)
	agentOrOp.POST("/rooms/:id/messages", s.handler(s.postMessage))
	agentOrOp.POST("/agents/:id/receive", s.handler(s.receive))
	agentOrOp.POST("/messages/:id/reply", s.handler(s.reply))
	agentOrOp.POST("/messages/:id/ack", s.handler(s.ack))

	s.engine = e
	return s, nil
}

// Handler is the http.Handler to serve.
func (s *Server) Handler() http.Handler { return s.engine }

// Routes lists the registered method and path pairs (gin syntax), for documents and tests.
func (s *Server) Routes() gin.RoutesInfo { return s.engine.Routes() }
