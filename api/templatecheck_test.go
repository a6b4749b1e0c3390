package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// checkRun is a TemplateCheck run that answers with a node's check, fails, or never answers.
type checkRun struct {
	client.WorkflowRun
	id     string
	answer *contract.TemplateCheck
	silent bool
}

func (r checkRun) GetID() string    { return r.id }
func (r checkRun) GetRunID() string { return "run" }
func (r checkRun) Get(ctx context.Context, out any) error {
	switch {
	case r.silent:
		<-ctx.Done()
		return ctx.Err()
	case r.answer == nil:
		return errors.New("activity error: node failed")
	}
	*out.(*contract.TemplateCheck) = *r.answer
	return nil
}

// nodeAnswers mocks Temporal so each node's TemplateCheck answers as answers says (a node
// missing from it never answers); it records the inputs asked.
func (h *harness) nodeAnswers(answers map[string]checkRun) *[]contract.TemplateCheckInput {
	var mu sync.Mutex
	asked := &[]contract.TemplateCheckInput{}
	h.temporal.On("ExecuteWorkflow", mock.Anything, mock.Anything, contract.TypeTemplateCheck, mock.Anything).Return(
		func(_ context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
			in := args[0].(contract.TemplateCheckInput)
			mu.Lock()
			*asked = append(*asked, in)
			mu.Unlock()
			if o.ID != contract.TemplateCheckID(in) {
				h.t.Errorf("workflow id %q for %+v", o.ID, in)
			}
			r, ok := answers[in.Node]
			if !ok {
				r.silent = true
			}
			r.id = o.ID
			return r, nil
		}, nil)
	return asked
}

func (h *harness) liveNode(name string, adapters ...domain.Provider) {
	h.t.Helper()
	if _, err := h.store.RegisterNode(context.Background(), domain.Node{Name: name, Hostname: "h", PID: 1, Adapters: adapters}); err != nil {
		h.t.Fatal(err)
	}
}

func TestATemplateIsCheckedAgainstTheLiveNodesThatRunIt(t *testing.T) {
	t.Parallel()
	acp := []domain.Provider{domain.ProviderACP}
	missingKey := &contract.TemplateCheck{MissingEnv: []string{"STUB_KEY"}, Command: &contract.CommandCheck{Command: "jam-testagent", Path: "/bin/x"}}
	badCommand := &contract.TemplateCheck{Command: &contract.CommandCheck{Command: "jam-testagent", Explicit: "/x/y",
		Problem: `executable "jam-testagent" refused: the template's command /x/y: does not exist; install jam-testagent at that path`}}
	fine := &contract.TemplateCheck{Command: &contract.CommandCheck{Command: "jam-testagent", Path: "/bin/x"}}
	tmpl := domain.TemplateConfig{Alias: "d", Transport: domain.TransportACP, EnvAllowlist: []string{"STUB_KEY"}}
	withCommand := domain.TemplateConfig{Alias: "d", Transport: domain.TransportACP, Command: "/x/y"}
	cases := []struct {
		name    string
		nodes   map[string][]domain.Provider
		answers map[string]checkRun
		tmpl    domain.TemplateConfig
		status  int
		says    []string
		asked   int
	}{
		{name: "the only node lacks the variable", nodes: map[string][]domain.Provider{"n1": acp},
			answers: map[string]checkRun{"n1": {answer: missingKey}}, tmpl: tmpl, status: 422, asked: 1,
			says: []string{"STUB_KEY is not set in the environment of node n1", "start it with STUB_KEY set (STUB_KEY=… jam worker --node n1)", "remove --env STUB_KEY"}},
		{name: "the command does not resolve", nodes: map[string][]domain.Provider{"n1": acp},
			answers: map[string]checkRun{"n1": {answer: badCommand}}, tmpl: withCommand, status: 422, asked: 1,
			says: []string{"command /x/y does not resolve on node n1", "does not exist", "install jam-testagent"}},
		{name: "another node has everything", nodes: map[string][]domain.Provider{"n1": acp, "n2": acp},
			answers: map[string]checkRun{"n1": {answer: missingKey}, "n2": {answer: fine}}, tmpl: tmpl, status: 201, asked: 2},
		{name: "every answering node lacks something", nodes: map[string][]domain.Provider{"n1": acp, "n2": acp, "n3": acp},
			answers: map[string]checkRun{"n1": {answer: missingKey}, "n2": {answer: badCommand}}, tmpl: tmpl, status: 422, asked: 3,
			says: []string{"no live node that runs ACP agent can start this template", "node n1", "node n2"}},
		{name: "nobody answers", nodes: map[string][]domain.Provider{"n1": acp, "n2": acp},
			answers: map[string]checkRun{"n2": {}}, tmpl: tmpl, status: 201, asked: 2},
		{name: "a node without the adapter is not asked", nodes: map[string][]domain.Provider{"n1": acp, "codex-only": {domain.ProviderCodex}},
			answers: map[string]checkRun{"n1": {answer: fine}}, tmpl: tmpl, status: 201, asked: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			for name, adapters := range c.nodes {
				h.liveNode(name, adapters...)
			}
			asked := h.nodeAnswers(c.answers)
			var owned AgentBody
			h.mustCall(http.MethodPost, "/v1/agents", testToken, CreateAgentRequest{Name: "builder", Kind: domain.AgentOwned}, &owned, 201)
			start := time.Now()
			r := h.call(http.MethodPost, "/v1/agents/"+owned.ID.String()+"/templates", testToken, c.tmpl, nil)
			if took := time.Since(start); took > templateCheckWait+time.Second {
				t.Errorf("the save took %s, want at most %s", took, templateCheckWait)
			}
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if len(*asked) != c.asked {
				t.Errorf("asked %d nodes, want %d: %+v", len(*asked), c.asked, *asked)
			}
			for _, in := range *asked {
				if in.Transport != c.tmpl.Transport || in.Command != c.tmpl.Command || strings.Join(in.Env, ",") != strings.Join(c.tmpl.EnvAllowlist, ",") || in.Sandboxed {
					t.Errorf("asked %+v for %+v", in, c.tmpl)
				}
			}
			if c.status != 422 {
				return
			}
			e := r.errorBody(t)
			if e.Code != domain.CodePrecondition || len(e.Validations) == 0 {
				t.Fatalf("error %+v", e)
			}
			for _, s := range c.says {
				if !strings.Contains(e.Message, s) {
					t.Errorf("message %q does not say %q", e.Message, s)
				}
			}
			var list TemplateList
			h.mustCall(http.MethodGet, "/v1/agents/"+owned.ID.String()+"/templates", testToken, nil, &list, 200)
			for _, tb := range list.Items {
				if tb.Alias == c.tmpl.Alias {
					t.Fatalf("a refused template was stored: %+v", tb)
				}
			}
		})
	}
}

// A save is checked as a create is, and a sandboxed template's command is left to its guest.
func TestATemplateSaveIsCheckedAndASandboxedCommandIsNot(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var owned AgentBody
	h.mustCall(http.MethodPost, "/v1/agents", testToken, CreateAgentRequest{Name: "builder", Kind: domain.AgentOwned}, &owned, 201)
	var list TemplateList
	h.mustCall(http.MethodGet, "/v1/agents/"+owned.ID.String()+"/templates", testToken, nil, &list, 200)
	h.liveNode("n1", domain.ProviderACP, domain.ProviderCursor)
	asked := h.nodeAnswers(map[string]checkRun{"n1": {answer: &contract.TemplateCheck{MissingEnv: []string{"A", "B"}}}})
	edit := list.Items[0].TemplateConfig
	edit.EnvAllowlist = []string{"A", "B"}
	r := h.call(http.MethodPut, "/v1/templates/"+list.Items[0].ID.String(), testToken, SaveTemplateRequest{TemplateConfig: edit}, nil)
	if e := r.errorBody(t); r.status != 422 || !strings.Contains(e.Message, "A and B are not set in the environment of node n1") ||
		!strings.Contains(e.Message, "A=… B=…") || !strings.Contains(e.Message, "remove --env A --env B") {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	placement := domain.PlacementDedicated
	boxed := domain.TemplateConfig{Alias: "boxed", Transport: domain.TransportCursorACP, Command: "/inside/the/guest",
		Args: []string{}, EnvAllowlist: []string{"A"}, Placement: &placement, Sandbox: domain.SandboxConfig{Enabled: true}}
	if r := h.call(http.MethodPost, "/v1/agents/"+owned.ID.String()+"/templates", testToken, boxed, nil); r.status != 422 {
		t.Fatalf("sandboxed template lacking its variable: status %d: %s", r.status, r.body)
	}
	if last := (*asked)[len(*asked)-1]; !last.Sandboxed || last.Transport != domain.TransportCursorACP {
		t.Fatalf("a sandboxed template was asked as host-native: %+v", last)
	}
}

// With no live node there is nothing to ask: the save stands.
func TestATemplateIsSavedWithNoLiveNode(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	asked := h.nodeAnswers(nil)
	var owned AgentBody
	h.mustCall(http.MethodPost, "/v1/agents", testToken, CreateAgentRequest{Name: "builder", Kind: domain.AgentOwned}, &owned, 201)
	h.mustCall(http.MethodPost, "/v1/agents/"+owned.ID.String()+"/templates", testToken,
		domain.TemplateConfig{Alias: "d", Transport: domain.TransportACP, EnvAllowlist: []string{"NOWHERE"}}, nil, 201)
	if len(*asked) != 0 {
		t.Fatalf("asked %+v with no live node", *asked)
	}
}
