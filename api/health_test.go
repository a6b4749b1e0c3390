package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
)

// HEAD /healthz and /readyz answer with GET's status and headers and no body, over a real
// connection and through the handler alike.
func TestHeadHealthzAndReadyzAnswerLikeGetWithoutABody(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	srv := h.live()
	for _, path := range []string{"/healthz", "/readyz"} {
		get := h.do(http.MethodGet, path, "", nil)
		head := h.do(http.MethodHead, path, "", nil)
		if head.status != get.status || head.status != http.StatusOK || len(head.body) != 0 {
			t.Fatalf("HEAD %s: status %d (GET %d), body %q", path, head.status, get.status, head.body)
		}
		if ct := head.header.Get("Content-Type"); ct != get.header.Get("Content-Type") || !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("HEAD %s: content type %q, GET %q", path, ct, get.header.Get("Content-Type"))
		}
		resp, err := http.Head(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("HEAD %s over HTTP: %d", path, resp.StatusCode)
		}
	}

	down := newHarness(t)
	down.temporal.ExpectedCalls = nil
	down.temporal.On("CheckHealth", mock.Anything, mock.Anything).Return(nil, errors.New("connection refused"))
	down.temporal.On("OperatorService").Return(fakeOperator{err: errors.New("connection refused")})
	if r := down.do(http.MethodHead, "/readyz", "", nil); r.status != http.StatusServiceUnavailable || len(r.body) != 0 {
		t.Fatalf("HEAD /readyz with Temporal down: %d %q", r.status, r.body)
	}
}
