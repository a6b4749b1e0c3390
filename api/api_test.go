package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/mocks"
	"google.golang.org/grpc"

	"github.com/jam-dev/jam/internal/band"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/lifecycle"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
)

const testToken = "test-operator-token"

type harness struct {
	t         testing.TB
	srv       *Server
	store     *store.Store
	temporal  *mocks.Client
	band      *band.Local
	lifecycle *lifecycle.Recorder
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessOn(t, teststore.SQLite(t))
}

// newHarnessOn serves the API over st, with a running local Band and a mocked Temporal.
func newHarnessOn(t testing.TB, st *store.Store) *harness {
	t.Helper()
	tc := &mocks.Client{}
	tc.On("CheckHealth", mock.Anything, mock.Anything).Return(&client.CheckHealthResponse{}, nil).Maybe()
	tc.On("OperatorService").Return(operatorWith(contract.SearchAttributeNames()...)).Maybe()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec := &lifecycle.Recorder{}
	b := band.NewLocal(st, rec, log)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{
		Store: st, Temporal: tc, Band: b, Lifecycle: rec, Token: testToken, Version: "test", Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, srv: srv, store: st, temporal: tc, band: b, lifecycle: rec}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) errorBody(t *testing.T) ErrorBody {
	t.Helper()
	var e ErrorBody
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("body is not the JSON error shape: %v: %s", err, r.body)
	}
	if e.Code == "" || e.Message == "" || e.RequestID == "" {
		t.Fatalf("incomplete error shape: %s", r.body)
	}
	return e
}

func (h *harness) do(method, path, token string, body io.Reader, header ...string) response {
	h.t.Helper()
	req := httptest.NewRequest(method, path, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func TestUnknownRouteGetsJSON404(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, path := range []string{"/nope", "/v1/nope", "/v1/nodes/a/b/c"} {
		r := h.do(http.MethodGet, path, testToken, nil)
		if r.status != http.StatusNotFound {
			t.Fatalf("%s: status %d", path, r.status)
		}
		if e := r.errorBody(t); e.Code != domain.CodeNotFound {
			t.Fatalf("%s: code %s", path, e.Code)
		}
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("%s: content type %q", path, ct)
		}
	}
}

func TestWrongMethodGetsJSON405(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do(http.MethodDelete, "/v1/nodes", testToken, nil)
	if r.status != http.StatusMethodNotAllowed || r.errorBody(t).Code != domain.CodeMethodNotAllowed {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
}

func TestMissingOrWrongTokenGetsJSON401(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cases := map[string]http.Header{
		"missing":      {},
		"wrong":        {"Authorization": {"Bearer not-the-token"}},
		"wrong scheme": {"Authorization": {"Basic " + testToken}},
		"empty bearer": {"Authorization": {"Bearer "}},
		"prefix only":  {"Authorization": {"Bearer " + testToken[:4]}},
	}
	for name, hdr := range cases {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/v1/nodes", nil)
			req.Header = hdr
			rec := httptest.NewRecorder()
			h.srv.Handler().ServeHTTP(rec, req)
			r := response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
			if r.status != http.StatusUnauthorized || r.errorBody(t).Code != domain.CodeUnauthorized {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if r.header.Get("WWW-Authenticate") == "" {
				t.Fatal("no WWW-Authenticate challenge")
			}
		})
	}
	if r := h.do(http.MethodGet, "/v1/nodes", testToken, nil); r.status != http.StatusOK {
		t.Fatalf("right token: status %d: %s", r.status, r.body)
	}
}

func TestBadBodiesGetTheJSONErrorShape(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	path := "/v1/settings/" + domain.SettingIdleSecs
	cases := []struct {
		name        string
		body        string
		contentType string
		status      int
		code        string
		field       string
	}{
		{"malformed", `{"value":`, "application/json", 400, domain.CodeMalformedBody, ""},
		{"not json", `value=5`, "", 400, domain.CodeMalformedBody, ""},
		{"empty", ``, "application/json", 400, domain.CodeMalformedBody, ""},
		{"trailing data", `{"value":5} {"value":6}`, "application/json", 400, domain.CodeMalformedBody, ""},
		{"array", `[1]`, "application/json", 400, domain.CodeMalformedBody, ""},
		{"unknown field", `{"value":5,"valu":6}`, "application/json", 400, domain.CodeValidation, "valu"},
		{"missing value", `{}`, "application/json", 400, domain.CodeValidation, "value"},
		{"null value", `{"value":null}`, "application/json", 400, domain.CodeValidation, "value"},
		{"wrong type", `{"value":"soon"}`, "application/json", 400, domain.CodeValidation, "value"},
		{"out of range", `{"value":0}`, "application/json", 400, domain.CodeValidation, "value"},
		{"not an integer", `{"value":1.5}`, "application/json", 400, domain.CodeValidation, "value"},
		{"other media type", `{"value":5}`, "text/plain", 415, domain.CodeUnsupportedMedia, ""},
		{"too large", `{"value":5,"pad":"` + strings.Repeat("x", maxBodyBytes) + `"}`, "application/json", 413, domain.CodeTooLarge, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.do(http.MethodPut, path, testToken, strings.NewReader(c.body), "Content-Type", c.contentType)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			e := r.errorBody(t)
			if e.Code != c.code {
				t.Fatalf("code %s, want %s", e.Code, c.code)
			}
			if c.field != "" && (len(e.Validations) == 0 || e.Validations[0].Field != c.field || e.Validations[0].Detail == "") {
				t.Fatalf("validations %+v, want field %s", e.Validations, c.field)
			}
		})
	}
	if _, err := h.store.GetSetting(context.Background(), domain.SettingIdleSecs); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused body was stored: %v", err)
	}
}

func TestServerErrorsNeverCarryInternalText(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.srv.engine.GET("/v1/fails", h.srv.handler(func(*gin.Context) error {
		return fmt.Errorf("dial tcp 10.0.0.7:5432: password authentication failed for user secret_admin")
	}))
	h.srv.engine.GET("/v1/panics", h.srv.handler(func(*gin.Context) error { panic("secret_admin exploded") }))
	for _, path := range []string{"/v1/fails", "/v1/panics"} {
		r := h.do(http.MethodGet, path, testToken, nil)
		if r.status != http.StatusInternalServerError || r.errorBody(t).Code != domain.CodeInternal {
			t.Fatalf("%s: status %d: %s", path, r.status, r.body)
		}
		if bytes.Contains(r.body, []byte("secret_admin")) || bytes.Contains(r.body, []byte("10.0.0.7")) {
			t.Fatalf("%s: internal text leaked: %s", path, r.body)
		}
	}
}

func TestACanceledRequestIsNotAServerFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.srv.engine.GET("/v1/gone", h.srv.handler(func(*gin.Context) error {
		return fmt.Errorf("wait for the node: %w", context.Canceled)
	}))
	if r := h.do(http.MethodGet, "/v1/gone", testToken, nil); r.status != statusClientClosed || r.errorBody(t).Code != domain.CodeCanceled {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
}

func TestRequestIDIsEchoedOrMinted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do(http.MethodGet, "/v1/nope", testToken, nil, "X-Request-ID", "client-42")
	if got := r.header.Get("X-Request-ID"); got != "client-42" || r.errorBody(t).RequestID != "client-42" {
		t.Fatalf("request id %q", got)
	}
	r = h.do(http.MethodGet, "/healthz", "", nil, "X-Request-ID", "bad id with spaces")
	if got := r.header.Get("X-Request-ID"); got == "" || strings.Contains(got, " ") {
		t.Fatalf("minted request id %q", got)
	}
}

func TestReadyzNeedsTheStoreAndTemporal(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do(http.MethodGet, "/readyz", "", nil)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}

	down := newHarness(t)
	down.temporal.ExpectedCalls = nil
	down.temporal.On("CheckHealth", mock.Anything, mock.Anything).Return(nil, errors.New("connection refused"))
	down.temporal.On("OperatorService").Return(fakeOperator{err: errors.New("connection refused")})
	r = down.do(http.MethodGet, "/readyz", "", nil)
	var body HealthBody
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusServiceUnavailable || body.Code != domain.CodeNotReady || body.Checks["temporal"] != "unreachable" ||
		body.Checks["store"] != "ok" || body.Checks["search_attributes"] != "unreachable" || strings.Contains(string(r.body), "refused") {
		t.Fatalf("status %d: %s", r.status, r.body)
	}

	closed := newHarness(t)
	_ = closed.store.Close()
	if r := closed.do(http.MethodGet, "/readyz", "", nil); r.status != http.StatusServiceUnavailable {
		t.Fatalf("closed store: status %d: %s", r.status, r.body)
	}

	// A namespace without Jam's search attributes: not ready, and the answer says which
	// are missing and how to create them.
	bare := newHarness(t)
	bare.temporal.ExpectedCalls = nil
	bare.temporal.On("CheckHealth", mock.Anything, mock.Anything).Return(&client.CheckHealthResponse{}, nil)
	bare.temporal.On("OperatorService").Return(operatorWith("JamAgent"))
	r = bare.do(http.MethodGet, "/readyz", "", nil)
	body = HealthBody{}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusServiceUnavailable || body.Checks["search_attributes"] != "missing" ||
		!strings.Contains(body.Message, "jam migrate temporal") || !strings.Contains(body.Message, "JamRoom") ||
		strings.Contains(body.Message, "JamAgent,") {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
}

// fakeOperator answers ListSearchAttributes with the given keyword attributes.
type fakeOperator struct {
	operatorservice.OperatorServiceClient
	names []string
	err   error
}

func operatorWith(names ...string) operatorservice.OperatorServiceClient {
	return fakeOperator{names: names}
}

func (f fakeOperator) ListSearchAttributes(context.Context, *operatorservice.ListSearchAttributesRequest, ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	attrs := map[string]enumspb.IndexedValueType{}
	for _, n := range f.names {
		attrs[n] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	return &operatorservice.ListSearchAttributesResponse{CustomAttributes: attrs}, nil
}

func TestNodesShowHeartbeatAgeAndStaleness(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	for _, name := range []string{"fresh", "gone"} {
		if _, err := h.store.RegisterNode(ctx, domain.Node{Name: name, Hostname: "h", PID: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// Three heartbeats missed: backdate the row as a silent worker would leave it.
	if _, err := h.store.DB().ExecContext(ctx, `UPDATE nodes SET heartbeat_at = ? WHERE name = 'gone'`,
		time.Now().UTC().Add(-45*time.Second)); err != nil {
		t.Fatal(err)
	}
	r := h.do(http.MethodGet, "/v1/nodes", testToken, nil)
	var list NodeList
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if len(list.Items) != 2 || list.Items[0].Name != "fresh" || list.Items[0].Stale || !list.Items[1].Stale ||
		list.Items[1].HeartbeatAgeSeconds < 44 || list.Items[1].TaskQueue != "jam.node.gone" {
		t.Fatalf("nodes %+v", list.Items)
	}
	if r := h.do(http.MethodGet, "/v1/nodes/absent", testToken, nil); r.status != 404 || r.errorBody(t).Code != domain.CodeNotFound {
		t.Fatalf("absent node: %d %s", r.status, r.body)
	}
	if r := h.do(http.MethodGet, "/v1/nodes/bad%20name", testToken, nil); r.status != 400 || r.errorBody(t).Code != domain.CodeValidation {
		t.Fatalf("bad node name: %d %s", r.status, r.body)
	}
	if list.Items[0].State != domain.NodeLive || list.Items[1].State != domain.NodeStale || list.Items[0].Adapters == nil {
		t.Fatalf("node states %+v", list.Items)
	}
}

func TestAnOperatorDrainsANodeAndPutsItBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if _, err := h.store.RegisterNode(context.Background(), domain.Node{Name: "n1", Hostname: "h", PID: 1, MaxRuntimes: 8}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path  string
		state domain.NodeState
	}{{"/v1/nodes/n1/drain", domain.NodeDraining}, {"/v1/nodes/n1/drain", domain.NodeDraining}, {"/v1/nodes/n1/undrain", domain.NodeLive}} {
		r := h.do(http.MethodPost, c.path, testToken, nil)
		var n NodeBody
		if err := json.Unmarshal(r.body, &n); err != nil || r.status != 200 || n.State != c.state || n.Draining != (c.state == domain.NodeDraining) || n.MaxRuntimes != 8 {
			t.Fatalf("POST %s: %d %s", c.path, r.status, r.body)
		}
	}
	if r := h.do(http.MethodPost, "/v1/nodes/absent/drain", testToken, nil); r.status != 404 || r.errorBody(t).Code != domain.CodeNotFound {
		t.Fatalf("drain absent node: %d %s", r.status, r.body)
	}
}

func TestSettingsCanBeSetAndRead(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	path := "/v1/settings/" + domain.SettingIdleSecs
	var got SettingBody
	r := h.do(http.MethodGet, path, testToken, nil)
	if err := json.Unmarshal(r.body, &got); err != nil || string(got.Value) != "null" || string(got.Default) != "600" {
		t.Fatalf("unset: %d %s", r.status, r.body)
	}
	r = h.do(http.MethodPut, path, testToken, strings.NewReader(`{"value": 90}`), "Content-Type", "application/json")
	if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 || string(got.Value) != "90" || got.UpdatedAt == nil {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	var list SettingList
	r = h.do(http.MethodGet, "/v1/settings", testToken, nil)
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Items) != len(domain.Settings()) {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	// Listed by key; other settings may sort before this one.
	i := slices.IndexFunc(list.Items, func(s SettingBody) bool { return s.Key == domain.SettingIdleSecs })
	if i < 0 || string(list.Items[i].Value) != "90" {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	if r := h.do(http.MethodGet, "/v1/settings/no.such", testToken, nil); r.status != 404 {
		t.Fatalf("unknown setting: %d %s", r.status, r.body)
	}
}
