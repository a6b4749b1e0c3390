package api

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// templateCheckWait bounds how long a save waits for the nodes it asks (their own bound plus a
// margin for the workflow's start and result): a node that has not answered by then is
// unknown and does not hold the save.
const templateCheckWait = contract.TemplateCheckTimeout + time.Second

// checkTemplateOn asks every node of nodes at once (the TemplateCheck workflow on each node's
// queue) whether cfg could start there, and refuses the save only when every node that
// answered lacks something: a variable its env_allowlist names, or, host-native, its
// command. A node that does not answer in time, or answers with a failure, is unknown; with
// no answer at all nothing is judged and the save stands.
// templateCheckFanOut bounds the template checks one save runs at once.
const templateCheckFanOut = 16

func (s *Server) checkTemplateOn(ctx context.Context, cfg domain.TemplateConfig, row domain.TransportSpec, nodes []domain.Node) error {
	ctx, cancel := context.WithTimeout(ctx, templateCheckWait)
	defer cancel()
	answers := make([]*contract.TemplateCheck, len(nodes))
	var wg sync.WaitGroup
	// A bounded number of questions at once: a large fleet is asked in turn within the
	// same time bound, and a node not reached in it is unknown, as a silent one is.
	sem := make(chan struct{}, templateCheckFanOut)
	for i, n := range nodes {
		in := contract.TemplateCheckInput{Node: n.Name, Transport: cfg.Transport, Command: cfg.Command,
			Env: cfg.EnvAllowlist, Sandboxed: cfg.Sandbox.Enabled}
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				return
			}
			var out contract.TemplateCheck
			run, err := contract.Start(ctx, s.cfg.Temporal, contract.TypeTemplateCheck, contract.TemplateCheckID(in), in)
			if err == nil {
				err = run.Get(ctx, &out)
			}
			if err != nil {
				s.log.Info("a node did not answer a template check; it does not hold the save", "node", n.Name, "error", err)
				return
			}
			answers[i] = &out
		})
	}
	wg.Wait()
	var lacking []templateLack
	for i, a := range answers {
		if a == nil {
			continue
		}
		l := templateLack{node: nodes[i], missing: a.MissingEnv}
		if a.Command != nil && a.Command.Problem != "" {
			l.command = a.Command
		}
		if len(l.missing) == 0 && l.command == nil {
			return nil // this node can start it
		}
		lacking = append(lacking, l)
	}
	if len(lacking) == 0 {
		return nil // nobody answered: nothing judged
	}
	return templateRefusal(cfg, row, lacking)
}

// templateLack is what one node that answered lacks of a template.
type templateLack struct {
	node    domain.Node
	missing []string
	command *contract.CommandCheck
}

// templateRefusal is the 422 naming, per node that answered, the variables and the command it
// lacks, and how to supply them.
func templateRefusal(cfg domain.TemplateConfig, row domain.TransportSpec, lacking []templateLack) *Error {
	var parts []string
	var fields []FieldError
	for _, l := range lacking {
		if len(l.missing) > 0 {
			parts = append(parts, missingEnvText(l.node, l.missing))
			for _, name := range l.missing {
				fields = append(fields, FieldError{Field: "env_allowlist", Detail: fmt.Sprintf("%s is not set on node %s", name, l.node.Name)})
			}
		}
		if l.command != nil {
			parts = append(parts, commandText(cfg, row, l.node, l.command))
			fields = append(fields, FieldError{Field: "command", Detail: fmt.Sprintf("does not resolve on node %s", l.node.Name)})
		}
	}
	msg := strings.Join(parts, "; ")
	if len(lacking) > 1 {
		msg = "no live node that runs " + row.Label + " can start this template: " + msg
	}
	return &Error{Status: http.StatusUnprocessableEntity, Code: domain.CodePrecondition, Message: msg, Validations: fields}
}

// missingEnvText says which variables a node's worker lacks and the two ways out.
func missingEnvText(n domain.Node, names []string) string {
	verb, set := "is", make([]string, len(names))
	if len(names) > 1 {
		verb = "are"
	}
	remove := make([]string, len(names))
	for i, name := range names {
		set[i], remove[i] = name+"=…", "--env "+name
	}
	them := names[0]
	if len(names) > 1 {
		them = "them"
	}
	return fmt.Sprintf("%s %s not set in the environment of node %s (%s); a template's env names variables the worker passes on to its runtimes: "+
		"start it with %s set (%s %s) or remove %s",
		joinAnd(names), verb, n.Name, workerOf(n), them, strings.Join(set, " "), startCommand(n), strings.Join(remove, " "))
}

// commandText says that the command does not resolve on a node: where it was looked for and
// the fix, in the resolver's words.
func commandText(cfg domain.TemplateConfig, row domain.TransportSpec, n domain.Node, c *contract.CommandCheck) string {
	what := "command " + c.Command + " (" + row.Label + "'s default)"
	if cfg.Command != "" {
		what = "command " + cfg.Command
	}
	why := strings.TrimPrefix(c.Problem, fmt.Sprintf("executable %q refused: ", c.Command))
	return fmt.Sprintf("%s does not resolve on node %s (%s): %s", what, n.Name, workerOf(n), why)
}

// workerOf names the process serving a node: this `jam dev` when its worker runs in the API's
// own process, else the node's `jam worker`.
func workerOf(n domain.Node) string {
	if servedHere(n) {
		return "the worker of this `jam dev`"
	}
	return "its `jam worker`"
}

func startCommand(n domain.Node) string {
	if servedHere(n) {
		return "jam dev"
	}
	return "jam worker --node " + n.Name
}

// servedHere: the node's worker is this process (jam dev runs the API and the worker in one).
func servedHere(n domain.Node) bool {
	host, _ := os.Hostname()
	return n.PID == os.Getpid() && n.Hostname == host
}

// joinAnd lists names as people do: "A", "A and B", "A, B and C".
func joinAnd(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// liveRunners are the nodes whose heartbeat is fresh at now and which run provider, and
// whether any node at all is live.
func liveRunners(nodes []domain.Node, now time.Time, provider domain.Provider) (runners []domain.Node, live bool) {
	for _, n := range nodes {
		if now.Sub(n.HeartbeatAt) > domain.NodeStaleAfter {
			continue
		}
		live = true
		if n.Runs(provider) {
			runners = append(runners, n)
		}
	}
	slices.SortFunc(runners, func(a, b domain.Node) int { return strings.Compare(a.Name, b.Name) })
	return runners, live
}
