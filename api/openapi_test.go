package api

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

type openAPIDoc struct {
	Paths map[string]map[string]struct {
		OperationID string                     `json:"operationId"`
		Responses   map[string]json.RawMessage `json:"responses"`
		Security    *[]map[string][]string     `json:"security"`
	} `json:"paths"`
}

var ginParam = regexp.MustCompile(`:([A-Za-z_]+)`)

// The hand-kept document and the router must list exactly the same routes.
func TestOpenAPIDocumentsEveryRegisteredRoute(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var doc openAPIDoc
	if err := json.Unmarshal(OpenAPIDocument(), &doc); err != nil {
		t.Fatalf("openapi.json does not parse: %v", err)
	}
	var registered, documented []string
	for _, r := range h.srv.Routes() {
		registered = append(registered, r.Method+" "+ginParam.ReplaceAllString(r.Path, "{$1}"))
	}
	ids := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
			if op.OperationID == "" || ids[op.OperationID] {
				t.Errorf("%s %s: missing or duplicate operationId %q", method, path, op.OperationID)
			}
			ids[op.OperationID] = true
			if len(op.Responses) == 0 {
				t.Errorf("%s %s: no responses documented", method, path)
			}
			public := op.Security != nil && len(*op.Security) == 0
			if strings.HasPrefix(path, "/v1/") && path != "/v1/openapi.json" {
				if public {
					t.Errorf("%s %s: documented as public but requires the operator token", method, path)
				}
				if _, ok := op.Responses["401"]; !ok {
					t.Errorf("%s %s: 401 not documented", method, path)
				}
			}
		}
	}
	sort.Strings(registered)
	sort.Strings(documented)
	if !slices.Equal(registered, documented) {
		t.Fatalf("routes and document differ\nregistered: %v\ndocumented: %v", registered, documented)
	}
}

func TestOpenAPIIsServedWithoutAToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do(http.MethodGet, "/v1/openapi.json", "", nil)
	if r.status != 200 || !json.Valid(r.body) {
		t.Fatalf("status %d", r.status)
	}
}
