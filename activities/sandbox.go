package activities

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/workspace"
)

// Sandbox holds the activities that drive this node's `sbx`. It is registered only on the
// node's task queue: the sandboxes, their owner markers and workspaces live on this machine.
type Sandbox struct {
	// Sbx is the `sbx` executable (an absolute path); "" searches PATH.
	Sbx string
	// PATH is the worker's PATH, searched for `sbx` when Sbx is ""; "" searches nothing.
	PATH string
	// Env is the environment `sbx` runs with: the worker's less credentials
	// (sandbox.HostEnv). nil is an empty environment, never the process's.
	Env    []string
	Store  *store.Store
	Layout domain.Layout
	// ToolTarget is the node's MCP endpoint as a guest reaches it (host:port); "" when the
	// node serves no tools to sandboxes. Every sandbox's network journal manages it.
	ToolTarget string

	mu      sync.Mutex
	drivers map[string]*sandbox.Driver
}

// env is what `sbx` runs with; a nil exec.Cmd.Env would inherit the worker's credentials.
func (s *Sandbox) env() []string {
	if s.Env == nil {
		return []string{}
	}
	return s.Env
}

// ProbeSandboxInput is empty; the node is chosen by the task queue.
type ProbeSandboxInput struct{}

// ProbeSandboxSupport classifies this node's `sbx` (absent, too old, daemon down, ok) within
// sandbox.ReadOnlyTimeout. It never fails: the classification is the answer.
func (s *Sandbox) ProbeSandboxSupport(ctx context.Context, _ ProbeSandboxInput) (sandbox.Support, error) {
	return sandbox.Probe(ctx, s.Sbx, s.PATH, s.env()), nil
}

// Driver is this node's `sbx` driver, its release probed once per executable path.
func (s *Sandbox) Driver(ctx context.Context) (*sandbox.Driver, error) {
	path, err := sandbox.Locate(s.Sbx, s.PATH)
	if err != nil {
		return nil, contract.Fail("no usable sbx on this node: "+sandbox.LocateProblem(s.Sbx, err), domain.ErrTypeSandboxUnavailable, err)
	}
	s.mu.Lock()
	d, ok := s.drivers[path]
	s.mu.Unlock()
	if ok {
		return d, nil
	}
	d = &sandbox.Driver{Path: path, Env: s.env()}
	v, err := d.ProbeVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("probe sbx version: %w", err)
	}
	if v.Less(sandbox.MinVersion) {
		return nil, contract.Fail(
			fmt.Sprintf("sbx %s is older than %s", v, sandbox.MinVersion), domain.ErrTypeSandboxUnavailable, nil)
	}
	s.mu.Lock()
	if s.drivers == nil {
		s.drivers = map[string]*sandbox.Driver{}
	}
	s.drivers[path] = d
	s.mu.Unlock()
	return d, nil
}

func (s *Sandbox) manager(ctx context.Context) (*sandbox.Manager, error) {
	d, err := s.Driver(ctx)
	if err != nil {
		return nil, err
	}
	return &sandbox.Manager{Driver: d, Markers: sandbox.Markers{Dir: s.Layout.SandboxOwnersDir()},
		Network: &sandbox.NetworkJournal{Dir: s.Layout.SandboxOwnersDir(), Driver: d}}, nil
}

// classify turns ownership failures into non-retryable errors: retrying cannot make a
// sandbox Jam's.
func classify(err error) error {
	switch {
	case errors.Is(err, sandbox.ErrOwnershipMismatch):
		return contract.Fail(err.Error(), domain.ErrTypeOwnershipMismatch, err)
	case errors.Is(err, sandbox.ErrNetworkDenied):
		return contract.Fail(err.Error(), domain.ErrTypeNetworkDenied, err)
	case errors.Is(err, sandbox.ErrNetworkAmbiguous):
		return contract.Fail(err.Error(), domain.ErrTypeNetworkAmbiguous, err)
	}
	return err
}

// EnsureSandboxInput names the host whose sandbox must be up and the member about to start.
type EnsureSandboxInput struct {
	Host    uuid.UUID `json:"host"`
	Session uuid.UUID `json:"session"`
	// Fence: no member holds the host, so a running sandbox is an orphan of a crash and is
	// verified and stopped before anything starts in it.
	Fence bool `json:"fence"`
}

// EnsureSandboxResult says what was done.
type EnsureSandboxResult struct {
	Name    string `json:"name"`
	Created bool   `json:"created"`
	Fenced  bool   `json:"fenced"`
}

// EnsureSandbox provisions the member's managed workspace (before `sbx create`: Docker
// captures the mounted tree when it creates the microVM), then creates or verifiably reuses
// the host's sandbox.
func (s *Sandbox) EnsureSandbox(ctx context.Context, in EnsureSandboxInput) (EnsureSandboxResult, error) {
	h, err := s.Store.GetRuntimeHost(ctx, in.Host)
	if errors.Is(err, store.ErrNotFound) {
		return EnsureSandboxResult{}, contract.Fail(err.Error(), domain.ErrTypeHostScope, err)
	}
	if err != nil {
		return EnsureSandboxResult{}, err
	}
	if h.State == domain.HostArchived || h.State == domain.HostRemoved {
		return EnsureSandboxResult{}, contract.Fail(
			fmt.Sprintf("runtime host %s is %s; nothing starts in its sandbox", h.ID, h.State), domain.ErrTypeHostScope, nil)
	}
	hs, err := s.Store.GetHostSession(ctx, in.Session)
	if errors.Is(err, store.ErrNotFound) {
		return EnsureSandboxResult{}, contract.Fail(err.Error(), domain.ErrTypeNoSession, err)
	}
	if err != nil {
		return EnsureSandboxResult{}, err
	}
	plan, err := SandboxPlan(s.Layout, h, hs.Config)
	if err != nil {
		return EnsureSandboxResult{}, contract.Fail(err.Error(), domain.ErrTypeValidation, err)
	}
	if err := ProvisionWorkspace(ctx, s.Store, s.Layout, h, hs); err != nil {
		return EnsureSandboxResult{}, err
	}
	m, err := s.manager(ctx)
	if err != nil {
		return EnsureSandboxResult{}, err
	}
	if err := requireCredential(ctx, m.Driver, hs.Config); err != nil {
		return EnsureSandboxResult{}, err
	}
	stop := heartbeat(ctx)
	defer stop()
	res, err := m.Ensure(ctx, plan, in.Fence)
	if err != nil {
		return EnsureSandboxResult{}, classify(err)
	}
	// Ownership is proven: the sandbox gets exactly the network its members need before any
	// provider starts in it.
	targets, err := s.networkTargets(ctx, h, &hs)
	if err != nil {
		return EnsureSandboxResult{}, err
	}
	if _, err := m.Network.Reconcile(ctx, plan.Name, targets, true); err != nil {
		return EnsureSandboxResult{}, classify(fmt.Errorf("network policy of sandbox %s: %w", plan.Name, err))
	}
	return EnsureSandboxResult{Name: plan.Name, Created: res.Created, Fenced: res.Fenced}, nil
}

// requireCredential refuses an api_key runtime whose Docker service secret is not set
// globally: credentials reach a guest only through Docker's egress proxy, never as env.
func requireCredential(ctx context.Context, d *sandbox.Driver, c domain.TemplateConfig) error {
	row, _ := domain.LookupTransport(c.Transport)
	if row.SecretService == "" || c.Normalized().AuthMode != domain.AuthAPIKey {
		return nil
	}
	ok, err := d.HasGlobalServiceSecret(ctx, row.SecretService)
	if err != nil {
		return fmt.Errorf("read sbx service secrets: %w", err)
	}
	if !ok {
		msg := fmt.Sprintf("%s with api_key auth needs a global Docker service secret for %s: run `sbx secret set -g %s`",
			row.Label, row.SecretService, row.SecretService)
		return contract.Fail(msg, domain.ErrTypeCredentialMissing, nil)
	}
	return nil
}

// ProvisionWorkspace makes a member's managed layout and records its state. A corrupt
// manifest is preserved and the workspace marked needs_reconciliation.
func ProvisionWorkspace(ctx context.Context, st *store.Store, l domain.Layout, h domain.RuntimeHost, hs domain.HostSession) error {
	row, _ := domain.LookupTransport(hs.Config.Transport)
	if ws, err := st.GetManagedWorkspace(ctx, hs.RuntimeSessionID); err == nil && ws.State == domain.WorkspaceArchived {
		return contract.Fail(fmt.Sprintf(
			"workspace %s is archived: restore one of its exports before the session runs again", ws.ID), domain.ErrTypeWorkspaceArchived, nil)
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	// An archive or restore in flight owns the bytes: a session restarted meanwhile must not
	// run in a workspace being removed or put back.
	if op, err := st.RunningWorkspaceOperation(ctx, hs.RuntimeSessionID); err != nil {
		return err
	} else if op != nil && (op.Kind == domain.WorkspaceOpArchive || op.Kind == domain.WorkspaceOpReconcile) {
		return contract.Fail(fmt.Sprintf(
			"workspace %s has a running %s operation; the session starts once it is done", hs.RuntimeSessionID, op.Kind),
			domain.ErrTypeOperationRunning, nil)
	}
	paths, err := workspace.ManagedPaths(l, h.ID)
	if err != nil {
		return err
	}
	state, perr := workspace.Provision(paths, h.AgentID, hs.RuntimeSessionID, row.Provider, time.Now())
	if state != "" {
		source := hs.Config.Sandbox.WorkspaceSource
		if source == "" {
			source = domain.WorkspaceManaged
		}
		if err := st.RecordManagedWorkspace(ctx, h.ID, hs.RuntimeSessionID, source, hs.Config.Sandbox.HostPath, state, time.Now()); err != nil {
			return err
		}
	}
	if errors.Is(perr, workspace.ErrManifestCorrupt) {
		return contract.Fail(perr.Error(), domain.ErrTypeWorkspaceCorrupt, perr)
	}
	return perr
}

// HostSandboxInput names a runtime host whose sandbox is parked or removed. The workflow
// passes the owner it loaded (agent and sandbox name), so a host whose record is gone (its
// agent was deleted) can still have its sandbox parked after ownership proof.
type HostSandboxInput struct {
	Host    uuid.UUID `json:"host"`
	AgentID uuid.UUID `json:"agent_id,omitempty"`
	Name    string    `json:"name,omitempty"`
}

// ParkSandbox stops the host's sandbox after proving it is Jam's (plan by owner and name,
// guest nonce). An absent or stopped sandbox is already parked.
func (s *Sandbox) ParkSandbox(ctx context.Context, in HostSandboxInput) error {
	owner, name, m, err := s.hostManager(ctx, in)
	if err != nil {
		return err
	}
	return classify(m.Park(ctx, owner, name))
}

// RemoveSandboxResult says whether a sandbox was destroyed.
type RemoveSandboxResult struct {
	Removed bool `json:"removed"`
}

// RemoveSandbox destroys the host's sandbox once its plan and guest nonce agree. A sandbox
// Docker no longer has only loses its marker.
func (s *Sandbox) RemoveSandbox(ctx context.Context, in HostSandboxInput) (RemoveSandboxResult, error) {
	owner, name, m, err := s.hostManager(ctx, in)
	if err != nil {
		return RemoveSandboxResult{}, err
	}
	removed, err := m.Remove(ctx, owner, name)
	return RemoveSandboxResult{Removed: removed}, classify(err)
}

func (s *Sandbox) hostManager(ctx context.Context, in HostSandboxInput) (sandbox.OwnerKey, string, *sandbox.Manager, error) {
	owner := sandbox.OwnerKey{Kind: sandbox.OwnerRuntimeHost, AgentID: in.AgentID, ID: in.Host}
	name := in.Name
	if name == "" || in.AgentID == uuid.Nil {
		h, err := s.Store.GetRuntimeHost(ctx, in.Host)
		if err != nil {
			return owner, "", nil, err
		}
		if !h.Sandboxed || h.SandboxName == "" {
			return owner, "", nil, contract.Fail(fmt.Sprintf("runtime host %s has no sandbox", in.Host), domain.ErrTypeNoSandbox, nil)
		}
		owner, name = OwnerOf(h), h.SandboxName
	}
	m, err := s.manager(ctx)
	return owner, name, m, err
}

// SandboxInventoryInput is empty; the node is chosen by the task queue.
type SandboxInventoryInput struct{}

// SandboxInventory classifies this node's sandboxes and owner markers against the runtime
// hosts pinned to it. It reads only.
func (s *Sandbox) SandboxInventory(ctx context.Context, _ SandboxInventoryInput) (sandbox.Inventory, error) {
	m, err := s.manager(ctx)
	if err != nil {
		return sandbox.Inventory{}, err
	}
	hosts, err := s.Store.ListRuntimeHosts(ctx, nil)
	if err != nil {
		return sandbox.Inventory{}, err
	}
	refs := map[string]sandbox.HostRef{}
	for _, h := range hosts {
		if h.Sandboxed && h.SandboxName != "" && h.State != domain.HostRemoved {
			refs[h.SandboxName] = sandbox.HostRef{ID: h.ID.String(), Name: h.SandboxName, Owner: OwnerOf(h)}
		}
	}
	return m.Inventory(ctx, refs)
}

// StopMovedSandboxesInput names the node whose worker starts.
type StopMovedSandboxesInput struct {
	Node string `json:"node"`
}

// StopMovedSandboxes stops, after ownership proof, every running sandbox on this node whose
// runtime host now lives on another node: the host moved while this node was fenced
// (store.RehomeHost), and its providers, if any outlived the worker in the guest, must not
// write to the shared host root another node's sandbox now serves. A worker runs it at start,
// before it serves its node's queue; it returns the names it stopped.
func (s *Sandbox) StopMovedSandboxes(ctx context.Context, in StopMovedSandboxesInput) ([]string, error) {
	return s.stopRunning(ctx, func(_ *sandbox.Manager, running []string) (map[string]sandbox.OwnerKey, error) {
		hosts, err := s.Store.ListRuntimeHosts(ctx, nil)
		if err != nil {
			return nil, err
		}
		owners := map[string]sandbox.OwnerKey{}
		for _, h := range hosts {
			if h.Sandboxed && slices.Contains(running, h.SandboxName) && h.Node != "" && h.Node != in.Node {
				owners[h.SandboxName] = OwnerOf(h)
			}
		}
		return owners, nil
	})
}

// StopSandboxesInStoreInput is empty; the node is the worker's own.
type StopSandboxesInStoreInput struct{}

// StopSandboxesInStore stops, after ownership proof, every running sandbox of this node whose
// workspace is in the node's host store: a host another node may take once this one is
// fenced. Killing the `sbx exec` clients (the fence) does not stop what runs in the guest, so
// a node that lost its store stops the microVMs too. It reads only the node's own owner
// markers and `sbx`, never the store, which it may be unable to reach; it returns the names
// it stopped.
func (s *Sandbox) StopSandboxesInStore(ctx context.Context, _ StopSandboxesInStoreInput) ([]string, error) {
	store := s.Layout.Hosts
	if store == "" {
		return nil, nil
	}
	return s.stopRunning(ctx, func(m *sandbox.Manager, running []string) (map[string]sandbox.OwnerKey, error) {
		owners := map[string]sandbox.OwnerKey{}
		for _, name := range running {
			mk, err := m.Markers.Read(name)
			if err != nil {
				continue // not one Jam made on this node
			}
			if rel, err := filepath.Rel(store, mk.Plan.Workspace); err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
				continue
			}
			owners[name] = mk.Plan.Owner
		}
		return owners, nil
	})
}

// stopRunning stops, after ownership proof, the running sandboxes of this node that pick
// names (with the owner to prove), and returns the names it stopped. pick runs only when a
// sandbox runs.
func (s *Sandbox) stopRunning(ctx context.Context,
	pick func(m *sandbox.Manager, running []string) (map[string]sandbox.OwnerKey, error)) ([]string, error) {
	m, err := s.manager(ctx)
	if err != nil {
		return nil, err
	}
	list, err := m.Driver.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	var running []string
	for _, sb := range list {
		if sb.Status == domain.SandboxRunning {
			running = append(running, sb.Name)
		}
	}
	if len(running) == 0 {
		return nil, nil
	}
	owners, err := pick(m, running)
	if err != nil {
		return nil, err
	}
	var stopped []string
	var errs []error
	for _, name := range running {
		owner, ok := owners[name]
		if !ok {
			continue
		}
		if err := m.Park(ctx, owner, name); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", name, err))
			continue
		}
		stopped = append(stopped, name)
	}
	return stopped, errors.Join(errs...)
}

// SandboxPrepareTimeout bounds creating or verifying a sandbox: `sbx create` may take 600 s
// (an image pull), plus the guest nonce exchange.
const SandboxPrepareTimeout = 630 * time.Second
