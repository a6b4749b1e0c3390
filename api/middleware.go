package api

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
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

// requireOperator admits requests that carry the operator token as a bearer token.
func (s *Server) requireOperator(c *gin.Context) {
	token, ok := bearer(c.GetHeader("Authorization"))
	if !ok || subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.Token)) != 1 {
		c.Header("WWW-Authenticate", `Bearer realm="jam"`)
		s.writeError(c, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "a valid bearer token is required"})
		return
	}
	c.Next()
}

func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
