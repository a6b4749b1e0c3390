// Package api is Jam's REST control API (Gin, under /v1). Handlers return errors; one
// adapter maps them to the JSON error shape, and a 500 never carries internal text.
package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.temporal.io/sdk/client"

	"github.com/jam-dev/jam/internal/store"
)

// Config is what the API serves from.
type Config struct {
	Store    *store.Store
	Temporal client.Client
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
}

func init() { gin.SetMode(gin.ReleaseMode) }

// New builds the router.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Temporal == nil || cfg.Logger == nil {
		return nil, errors.New("api: store, temporal client and logger are required")
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
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no such route"}
	}))
	e.NoMethod(s.handler(func(*gin.Context) error {
		return &Error{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed, Message: "method not allowed on this route"}
	}))

	e.GET("/healthz", s.handler(s.healthz))
	e.GET("/readyz", s.handler(s.readyz))
	e.GET("/v1/openapi.json", s.handler(s.openAPI))

	v1 := e.Group("/v1", s.requireOperator)
	v1.GET("/nodes", s.handler(s.listNodes))
	v1.GET("/nodes/:name", s.handler(s.getNode))
	v1.POST("/nodes/:name/probe", s.handler(s.probeNode))
	v1.GET("/settings", s.handler(s.listSettings))
	v1.GET("/settings/:key", s.handler(s.getSetting))
	v1.PUT("/settings/:key", s.handler(s.putSetting))

	s.engine = e
	return s, nil
}

// Handler is the http.Handler to serve.
func (s *Server) Handler() http.Handler { return s.engine }

// Routes lists the registered method and path pairs (gin syntax), for documents and tests.
func (s *Server) Routes() gin.RoutesInfo { return s.engine.Routes() }
