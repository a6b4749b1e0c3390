package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
)

// fakeAPI answers every request with body and records what it was sent.
type fakeAPI struct {
	method, path, query, body, auth string
}

func (f *fakeAPI) serve(t *testing.T, answer any) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.method, f.path, f.query, f.body, f.auth = r.Method, r.URL.Path, r.URL.RawQuery, string(b), r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("jam %v: %v", args, err)
	}
	return out.String()
}

func TestPermissionCommandsCallTheAPI(t *testing.T) {
	id := uuid.New()
	decision := domain.PermissionAllowAlways
	body := api.PermissionBody{ID: id, AgentID: uuid.New(), ToolKey: "edit", Title: "edit main.go",
		State: domain.PermissionAllowed, Decision: &decision, CreatedAt: time.Now()}

	var f fakeAPI
	url := f.serve(t, api.PermissionList{Items: []api.PermissionBody{body}})
	out := runCLI(t, "permissions", "list", "--state", "pending", "--url", url, "--token", "tok")
	if f.method != http.MethodGet || f.path != "/v1/permissions" || f.query != "state=pending" || f.auth != "Bearer tok" {
		t.Fatalf("sent %+v", f)
	}
	if !strings.Contains(out, id.String()) || !strings.Contains(out, "allow_always") || !strings.Contains(out, "edit main.go") {
		t.Fatalf("table:\n%s", out)
	}

	url = f.serve(t, body)
	out = runCLI(t, "permission", "decide", id.String(), "allow_always", "--url", url, "--token", "tok")
	if f.method != http.MethodPost || f.path != "/v1/permissions/"+id.String()+"/decision" {
		t.Fatalf("sent %+v", f)
	}
	var sent api.DecidePermissionRequest
	if err := json.Unmarshal([]byte(f.body), &sent); err != nil || sent.Decision != domain.PermissionAllowAlways {
		t.Fatalf("body %s (%v)", f.body, err)
	}
	if !strings.Contains(out, "allowed (allow_always)") {
		t.Fatalf("output %q", out)
	}
	out = runCLI(t, "permission", "decide", id.String(), "deny", "--json", "--url", url, "--token", "tok")
	var echoed api.PermissionBody
	if err := json.Unmarshal([]byte(out), &echoed); err != nil || echoed.ID != id {
		t.Fatalf("--json output %q (%v)", out, err)
	}
}
