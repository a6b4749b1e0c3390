package api

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

const (
	requestIDHeader = "X-Request-ID"
	requestIDKey    = "jam.request_id"
)

var clientRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// withRequestID keeps a well-formed client request id, else mints one, and echoes it.
func withRequestID(c *gin.Context) {
	rid := c.GetHeader(requestIDHeader)
	if !clientRequestID.MatchString(rid) {
		rid = uuid.NewString()
	}
	c.Set(requestIDKey, rid)
	c.Header(requestIDHeader, rid)
	c.Next()
}

func requestID(c *gin.Context) string { return c.GetString(requestIDKey) }

// accessLog logs one line per request at debug level, failures at info.
func (s *Server) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	status := c.Writer.Status()
	log := s.log.Debug
	if status >= 400 {
		log = s.log.Info
	}
	route := c.FullPath()
	if route == "" {
		route = "(no route)"
	}
	log("request", "request_id", requestID(c), "method", c.Request.Method, "route", route,
		"status", status, "duration_ms", time.Since(start).Milliseconds())
}

// recovery turns a panic into the JSON 500 shape; the panic value is logged, not sent.
func (s *Server) recovery(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			s.writeError(c, fmt.Errorf("panic: %v", r))
		}
	}()
	c.Next()
}

const principalKey = "jam.principal"

// principal is who a request speaks for: the operator, or one attached agent by its key.
type principal struct {
	operator bool
	agent    *domain.Agent
}

// authenticate resolves the bearer token to the operator or an attached agent.
func (s *Server) authenticate(c *gin.Context) (principal, bool) {
	token, ok := bearer(c.GetHeader("Authorization"))
	if !ok {
		return principal{}, false
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.Token)) == 1 {
		return principal{operator: true}, true
	}
	if !domain.LooksLikeAgentKey(token) {
		return principal{}, false
	}
	a, err := s.cfg.Store.AgentByKeyHash(c.Request.Context(), domain.HashAgentKey(token))
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("agent key lookup failed", "request_id", requestID(c), "error", err)
		}
		return principal{}, false
	}
	return principal{agent: &a}, true
}

func (s *Server) unauthorized(c *gin.Context) {
	c.Header("WWW-Authenticate", `Bearer realm="jam"`)
	s.writeError(c, &Error{Status: http.StatusUnauthorized, Code: domain.CodeUnauthorized, Message: "a valid bearer token is required"})
}

// requireOperator admits requests that carry the operator token.
func (s *Server) requireOperator(c *gin.Context) {
	p, ok := s.authenticate(c)
	switch {
	case !ok:
		s.unauthorized(c)
	case !p.operator:
		s.writeError(c, &Error{Status: http.StatusForbidden, Code: domain.CodeForbidden, Message: "this route needs the operator token"})
	default:
		c.Set(principalKey, p)
		c.Next()
	}
}

// requireAnyone admits the operator and attached agents that are not stopped; handlers
// check what each may do.
func (s *Server) requireAnyone(c *gin.Context) {
	p, ok := s.authenticate(c)
	switch {
	case !ok:
		s.unauthorized(c)
	case p.agent != nil && p.agent.RunIntent == domain.RunIntentStopped:
		s.writeError(c, agentStopped(fmt.Errorf("agent %s: %w", p.agent.ID, domain.ErrAgentStopped)))
	default:
		c.Set(principalKey, p)
		c.Next()
	}
}

func principalOf(c *gin.Context) principal {
	p, _ := c.Get(principalKey)
	pr, _ := p.(principal)
	return pr
}

// agentPrincipal returns the calling agent, or a 403 for the operator: settling and receiving
// are an agent's own acts and need its key.
func agentPrincipal(c *gin.Context) (domain.Agent, error) {
	p := principalOf(c)
	if p.agent == nil {
		return domain.Agent{}, &Error{Status: http.StatusForbidden, Code: domain.CodeForbidden, Message: "this route needs the agent's own API key"}
	}
	return *p.agent, nil
}

func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
