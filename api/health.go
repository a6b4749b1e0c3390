package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"go.temporal.io/sdk/client"
)

// readinessTimeout bounds each dependency check of /readyz.
const readinessTimeout = 2 * time.Second

// HealthBody answers /healthz and /readyz.
type HealthBody struct {
	Status  string            `json:"status"`
	Version string            `json:"version,omitempty"`
	Checks  map[string]string `json:"checks,omitempty"`
	// Code and Message are set when not ready, matching the error shape.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// withoutBody answers a HEAD request like its GET, status and headers, but drops the body
// (net/http drops it on the wire too; this also keeps it out of recorders and middleware).
func withoutBody(c *gin.Context) {
	c.Writer = bodyless{c.Writer}
	c.Next()
}

type bodyless struct{ gin.ResponseWriter }

func (w bodyless) Write(b []byte) (int, error) {
	w.WriteHeaderNow()
	return len(b), nil
}

func (w bodyless) WriteString(s string) (int, error) {
	w.WriteHeaderNow()
	return len(s), nil
}

func (s *Server) healthz(c *gin.Context) error {
	c.JSON(http.StatusOK, HealthBody{Status: "ok", Version: s.cfg.Version})
	return nil
}

// readyz reports ready only when the store and Temporal both answer and the namespace has
// Jam's search attributes (every workflow start sets them).
func (s *Server) readyz(c *gin.Context) error {
	checks := map[string]func(context.Context) error{
		"store": s.cfg.Store.Ping,
		"temporal": func(ctx context.Context) error {
			_, err := s.cfg.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		},
		"search_attributes": s.searchAttributesReady,
	}
	results := make(map[string]string, len(checks))
	var detail string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, check := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(c.Request.Context(), readinessTimeout)
			defer cancel()
			status := "ok"
			var missing *contract.ErrSearchAttributesMissing
			if err := check(ctx); errors.As(err, &missing) {
				status = "missing"
				mu.Lock()
				detail = missing.Error()
				mu.Unlock()
			} else if err != nil {
				status = "unreachable"
				s.log.Warn("readiness check failed", "check", name, "request_id", requestID(c), "error", err)
			}
			mu.Lock()
			results[name] = status
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, name := range []string{"store", "temporal", "search_attributes"} {
		if results[name] != "ok" {
			msg := name + " is unreachable"
			if results[name] == "missing" {
				msg = detail // which attributes, and the commands that create them
			}
			c.JSON(http.StatusServiceUnavailable, HealthBody{
				Status: "not_ready", Version: s.cfg.Version, Checks: results,
				Code: domain.CodeNotReady, Message: msg,
			})
			return nil
		}
	}
	c.JSON(http.StatusOK, HealthBody{Status: "ready", Version: s.cfg.Version, Checks: results})
	return nil
}

// searchAttributesReady checks the namespace has Jam's search attributes; once it has, the
// answer is kept (an operator does not delete them from under a running cluster).
func (s *Server) searchAttributesReady(ctx context.Context) error {
	if s.searchAttrsOK.Load() {
		return nil
	}
	if err := contract.EnsureSearchAttributes(ctx, s.cfg.Temporal, s.cfg.Namespace, false); err != nil {
		return err
	}
	s.searchAttrsOK.Store(true)
	return nil
}
