package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// NodeBody is a node with the age of its last heartbeat.
type NodeBody struct {
	Name                string    `json:"name"`
	Hostname            string    `json:"hostname"`
	PID                 int       `json:"pid"`
	Version             string    `json:"version"`
	DataDir             string    `json:"data_dir"`
	TaskQueue           string    `json:"task_queue"`
	StartedAt           time.Time `json:"started_at"`
	HeartbeatAt         time.Time `json:"heartbeat_at"`
	HeartbeatAgeSeconds float64   `json:"heartbeat_age_seconds"`
	// Stale is true once three heartbeats in a row were missed.
	Stale bool `json:"stale"`
	// State is live, draining or stale.
	State domain.NodeState `json:"state"`
	// Runtimes is the live runtimes placed on the node (started or starting); MaxRuntimes
	// how many it carries at most (0: no limit).
	Runtimes    int `json:"runtimes"`
	MaxRuntimes int `json:"max_runtimes"`
	// Draining: the node takes no new runtime (`jam node drain`).
	Draining bool `json:"draining"`
	// Adapters are the provider families the node's worker can run.
	Adapters []domain.Provider `json:"adapters"`
	// Sandbox is the node's `sbx` support as its worker last probed it (at its start, every
	// minute, or on GET /v1/sandbox/support); absent until the first probe. Sandboxed
	// runtimes are placed only on nodes where it is ok (or not probed yet).
	Sandbox domain.SandboxSupport `json:"sandbox,omitempty"`
	// CLIs are the provider CLIs the node's worker resolved when it last probed them (at its
	// start, in the background, unless JAM_WORKER_PROBE_CLIS=0; or POST
	// /v1/nodes/{name}/probe); null until then. Host-native runtimes are placed only on nodes
	// whose CLI has no problem (or not probed yet).
	CLIs []domain.NodeCLI `json:"clis"`
	// HostStore is the directory of the node's runtime-host roots as "<id>:<path>"; nodes with
	// the same one share them (jam worker --host-store).
	HostStore string `json:"host_store,omitempty"`
}

// NodeList is the body of GET /v1/nodes.
type NodeList struct {
	Items []NodeBody `json:"items"`
}

// NodeProbeBody is the body of POST /v1/nodes/{name}/probe.
type NodeProbeBody struct {
	Report     NodeReportBody `json:"report"`
	WorkflowID string         `json:"workflow_id"`
	RunID      string         `json:"run_id"`
}

func nodeBody(n domain.Node, now time.Time) NodeBody {
	age := now.Sub(n.HeartbeatAt)
	adapters := n.Adapters
	if adapters == nil {
		adapters = []domain.Provider{}
	}
	return NodeBody{
		Name: n.Name, Hostname: n.Hostname, PID: n.PID, Version: n.Version, DataDir: n.DataDir,
		TaskQueue: contract.NodeTaskQueue(n.Name), StartedAt: n.StartedAt, HeartbeatAt: n.HeartbeatAt,
		HeartbeatAgeSeconds: max(0, age.Round(time.Millisecond).Seconds()), Stale: age > domain.NodeStaleAfter,
		State: n.State(now), Runtimes: n.Runtimes, MaxRuntimes: n.MaxRuntimes, Draining: n.Draining, Adapters: adapters,
		Sandbox: n.Sandbox, CLIs: n.CLIs, HostStore: n.HostStore,
	}
}

// drainNode takes the node out of service (POST /v1/nodes/{name}/drain) or back in
// (/undrain): a drained node takes no new runtime; its live runtimes are reaped when idle,
// and rooms whose workspace is on its disk keep waking there.
func (s *Server) drainNode(draining bool) func(c *gin.Context) error {
	return func(c *gin.Context) error {
		n, err := s.nodeParam(c)
		if err != nil {
			return err
		}
		n, err = s.cfg.Store.SetNodeDraining(c.Request.Context(), n.Name, draining)
		if errors.Is(err, store.ErrNotFound) {
			return notFound("node", err)
		}
		if err != nil {
			return err
		}
		return s.writeNode(c, n)
	}
}

// writeNode answers with the node as it stands at the database's now.
func (s *Server) writeNode(c *gin.Context, n domain.Node) error {
	now, err := s.cfg.Store.Now(c.Request.Context())
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, nodeBody(n, now))
	return nil
}

func (s *Server) listNodes(c *gin.Context) error {
	nodes, err := s.cfg.Store.ListNodes(c.Request.Context())
	if err != nil {
		return err
	}
	now, err := s.cfg.Store.Now(c.Request.Context())
	if err != nil {
		return err
	}
	out := NodeList{Items: make([]NodeBody, len(nodes))}
	for i, n := range nodes {
		out.Items[i] = nodeBody(n, now)
	}
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) nodeParam(c *gin.Context) (domain.Node, error) {
	name := c.Param("name")
	if err := domain.ValidateNodeName(name); err != nil {
		return domain.Node{}, err
	}
	n, err := s.cfg.Store.GetNode(c.Request.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return domain.Node{}, notFound("node", err)
	}
	return n, err
}

func (s *Server) getNode(c *gin.Context) error {
	n, err := s.nodeParam(c)
	if err != nil {
		return err
	}
	return s.writeNode(c, n)
}

// probeNode runs the NodeProbe workflow and waits for the node's own worker to answer. It
// is bounded by NodeProbeTimeout, so it never holds the request for long.
func (s *Server) probeNode(c *gin.Context) error {
	n, err := s.nodeParam(c)
	if err != nil {
		return err
	}
	var report contract.NodeReport
	run, err := s.askNode(c, n.Name, contract.NodeProbeID(n.Name), contract.NodeProbeTimeout, contract.TypeNodeProbe, &report)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, NodeProbeBody{Report: nodeReportBody(report), WorkflowID: run.GetID(), RunID: run.GetRunID()})
	return nil
}

// askNode runs a one-activity workflow whose activity is on the node's own queue and waits
// for its answer into out, within bound plus a margin. A node that does not answer is 504; a
// node that answers with a failure is 502.
func (s *Server) askNode(c *gin.Context, node, id string, bound time.Duration, wf string, out any) (client.WorkflowRun, error) {
	return s.askNodeWith(c, node, id, bound, wf, contract.NodeProbeInput{Node: node}, out)
}

// askNodeWith is askNode for a question workflow that takes its own input.
func (s *Server) askNodeWith(c *gin.Context, node, id string, bound time.Duration, wf string, in, out any) (client.WorkflowRun, error) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), bound+5*time.Second)
	defer cancel()
	run, err := contract.Start(ctx, s.cfg.Temporal, wf, id, in)
	if err != nil {
		return nil, &Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable, Message: "the workflow service is unavailable", Cause: err}
	}
	if err := run.Get(ctx, out); err != nil {
		// A node whose worker is gone times the activity out; with no worker on the shared
		// queue either, the workflow never runs and our own deadline ends the wait.
		var (
			timeout  *temporal.TimeoutError
			deadline *serviceerror.DeadlineExceeded
			failed   *temporal.ActivityError
		)
		switch {
		// The long poll for the result may end on the RPC deadline a moment before ctx's.
		case errors.As(err, &timeout), errors.As(err, &deadline), ctx.Err() != nil:
			return nil, &Error{Status: http.StatusGatewayTimeout, Code: domain.CodeTimeout,
				Message: fmt.Sprintf("node %s did not answer within %s", node, bound), Cause: err}
		case errors.As(err, &failed):
			return nil, &Error{Status: http.StatusBadGateway, Code: domain.CodeUpstream,
				Message: fmt.Sprintf("node %s answered with a failure; see its worker's log", node), Cause: err}
		}
		return nil, err
	}
	return run, nil
}
