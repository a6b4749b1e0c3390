// Package app composes Jam's processes: `jam dev` (everything in one process), `jam server`
// (the API) and `jam worker` (one node's workers). cmd/jam only parses flags and calls here.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/band"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/lifecycle"
	"github.com/jam-dev/jam/internal/roomctl"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/schema"
	"github.com/jam-dev/jam/workers"
)

// Options configure every process; each command reads the fields it needs.
type Options struct {
	Home        string // data directory
	Listen      string // API address
	DatabaseURL string
	// TemporalAddress and Namespace locate an external Temporal (server, worker).
	TemporalAddress string
	Namespace       string
	// TemporalListen and UIListen are where `jam dev` serves its embedded Temporal and Web UI.
	TemporalListen string
	UIListen       string
	// PprofListen, when set, is a loopback address serving Go's pprof profiles.
	PprofListen string
	// AllowRemoteUI lets TemporalListen and UIListen be non-loopback addresses; both serve
	// without Jam's token.
	AllowRemoteUI bool
	// TemporalUIURL is the Web UI that API answers link workflows to (jam server; jam dev
	// links its embedded UI).
	TemporalUIURL string
	// TemporalDB is the embedded Temporal's SQLite file (default $JAM_HOME/temporal.db).
	TemporalDB string
	// TemporalLogLevel filters the embedded Temporal server's own logs.
	TemporalLogLevel slog.Level
	Node             string
	// MaxRuntimes is how many live runtimes this node's worker carries at most: 0 no limit,
	// -1 from the machine (domain.DefaultMaxRuntimes).
	MaxRuntimes int
	// HostStore is the directory of the worker's runtime-host roots when not the data
	// directory's own (jam worker --host-store): a shared filesystem nodes mount at one path.
	HostStore string
	// Sbx is the `sbx` executable (--sbx / JAM_SBX); "" resolves sbx on PATH.
	Sbx       string
	Ephemeral bool
	// APIToken is JAM_API_TOKEN; when empty the token file under Home is used.
	APIToken string
	Version  string
	// JamExecutable is this jam binary, which providers run as `jam mcp` (the stdio bridge
	// to Jam's tools); "" offers no bridge.
	JamExecutable string
	Logger        *slog.Logger
	// Out receives the human-facing banner.
	Out io.Writer
	// HTTP bounds what one client connection may hold of the API; zero fields take
	// DefaultHTTPLimits.
	HTTP HTTPLimits
}

// HTTPLimits bound what one client connection may hold of the API server.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included. It does not bound the
	// handler: net/http lifts the read deadline once the request is read (when it starts
	// watching for the client going away), so the event stream, the 55 s long poll and a
	// host control run to their own bounds (TestAPIEventStreamAndLongPollOutliveTheReadTimeout).
	ReadTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends no next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header block.
	MaxHeaderBytes int
}

// DefaultHTTPLimits: Jam's requests are small documents (bodies at most 1 MiB, headers a
// bearer token and a few fields), so a client that has not sent one within these bounds is
// trickling on purpose or gone.
func DefaultHTTPLimits() HTTPLimits {
	return HTTPLimits{
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// orDefault fills the zero fields from DefaultHTTPLimits.
func (l HTTPLimits) orDefault() HTTPLimits {
	d := DefaultHTTPLimits()
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = d.ReadHeaderTimeout
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = d.ReadTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	return l
}

// apiShutdownTimeout bounds how long in-flight requests may finish at shutdown; it exceeds
// the longest bounded request (a node probe, 15 s), after which connections are closed.
const apiShutdownTimeout = 20 * time.Second

func (o Options) layout() domain.Layout { return domain.Layout{Root: o.Home} }

func (o Options) prepareHome() error {
	if o.Home == "" {
		return errors.New("no data directory: set JAM_HOME or --home")
	}
	if err := os.MkdirAll(o.Home, 0o700); err != nil {
		return fmt.Errorf("create data directory %s: %w", o.Home, err)
	}
	return nil
}

// claimHome prepares the data directory and takes its exclusive lock, for the processes
// that own a node's files (jam dev, jam worker).
func (o Options) claimHome() (*homeLock, error) {
	if err := o.prepareHome(); err != nil {
		return nil, err
	}
	return lockHome(o.Home)
}

// openProductionStore opens Postgres and refuses a schema that is not at this binary's version.
func openProductionStore(ctx context.Context, rawURL string) (*store.Store, error) {
	if rawURL == "" {
		return nil, errors.New("JAM_DATABASE_URL (--database-url) is required: postgres://…")
	}
	t, err := store.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if t.Dialect != schema.Postgres {
		return nil, errors.New("jam server and jam worker need a Postgres JAM_DATABASE_URL (postgres://…); SQLite is for jam dev")
	}
	st, err := store.OpenTarget(ctx, t)
	if err != nil {
		return nil, err
	}
	v, err := schema.CurrentVersion(ctx, st.Dialect(), st.DB())
	if err != nil {
		st.Close()
		return nil, err
	}
	if v.Dirty || v.Version != v.Latest {
		st.Close()
		return nil, fmt.Errorf("database schema is at version %d (dirty=%v) but this binary needs %d: run `jam migrate up`", v.Version, v.Dirty, v.Latest)
	}
	return st, nil
}

func clientOptions(address, namespace string, logger *slog.Logger) client.Options {
	return client.Options{
		HostPort:  address,
		Namespace: namespace,
		Logger:    sdklog.NewStructuredLogger(logger.With("component", "temporal-client")),
	}
}

// dialTemporal connects, retrying with backoff until Temporal answers or ctx ends, so a
// worker can start before the cluster it serves.
func dialTemporal(ctx context.Context, address, namespace string, logger *slog.Logger) (client.Client, error) {
	delay := 500 * time.Millisecond
	for {
		c, err := client.DialContext(ctx, clientOptions(address, namespace, logger))
		if err == nil {
			return c, nil
		}
		logger.Warn("temporal not reachable yet; retrying", "address", address, "namespace", namespace, "retry_in", delay, "error", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to temporal at %s: %w", address, err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// apiServer is a listening HTTP server for the API.
type apiServer struct {
	http     *http.Server
	listener net.Listener
	done     chan error
	// stopRequests ends the context of every request, so held-open requests (event streams,
	// long polls) return as soon as shutdown begins instead of holding it up.
	stopRequests context.CancelFunc
}

func startAPI(cfg api.Config, listen string, limits HTTPLimits) (*apiServer, error) {
	limits = limits.orDefault()
	srv, err := api.New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listen for the API on %s: %w", listen, err)
	}
	base, stop := context.WithCancel(context.Background())
	srv.WatchOperations(base)
	a := &apiServer{
		http: &http.Server{
			Handler:           srv.Handler(),
			ReadHeaderTimeout: limits.ReadHeaderTimeout,
			ReadTimeout:       limits.ReadTimeout,
			IdleTimeout:       limits.IdleTimeout,
			MaxHeaderBytes:    limits.MaxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
			BaseContext:       func(net.Listener) context.Context { return base },
		},
		listener:     ln,
		done:         make(chan error, 1),
		stopRequests: stop,
	}
	go func() {
		err := a.http.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		a.done <- err
	}()
	return a, nil
}

// URL is the API's base URL.
func (a *apiServer) URL() string { return "http://" + a.listener.Addr().String() }

// shutdown stops accepting requests, ends held-open ones, lets the others finish within the
// bound and then closes whatever is left, so nothing in the API outlives this call.
func (a *apiServer) shutdown() error {
	a.stopRequests()
	ctx, cancel := context.WithTimeout(context.Background(), apiShutdownTimeout)
	defer cancel()
	err := a.http.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, a.http.Close())
	}
	<-a.done
	return err
}

// runBand starts the local Band's event tailer and binds memberships that lack a binding
// (the level-triggered half of binding, for a crash between the two or a down Jam).
func runBand(ctx context.Context, st *store.Store, starter lifecycle.Starter, log *slog.Logger) (*band.Local, error) {
	b := band.NewLocal(st, starter, log.With("component", "band"))
	if err := b.Start(ctx); err != nil {
		return nil, err
	}
	if err := b.BindUnbound(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// roomStarter is the API's lifecycle.Starter. It reads the lifecycle mode the workers read
// (JAM_OWNED_RUNTIME_LAZY): under the lazy lifecycle a new binding starts no workflow.
func roomStarter(tc client.Client, st *store.Store) (*roomctl.Starter, error) {
	l, err := activities.LifecycleFromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("server configuration: %w", err)
	}
	return &roomctl.Starter{Client: tc, Store: st, Eager: l.Eager}, nil
}

// startWorkers starts a node's workers; it shares the node default (the host name) with every command.
func startWorkers(ctx context.Context, o Options, c client.Client, st *store.Store) (*workers.Workers, error) {
	we, err := parseWorkerEnv(os.Environ(), o.Sbx, o.Logger)
	if err != nil {
		return nil, err
	}
	var guard []string
	if o.JamExecutable != "" {
		we.mcp.Bridge = []string{o.JamExecutable, "mcp"}
		guard = []string{o.JamExecutable, "process-guard"}
	}
	return workers.Start(ctx, workers.Config{
		Client: c, Namespace: o.Namespace, Store: st, Node: o.Node, DataDir: o.Home, Version: o.Version, Sbx: we.sbx,
		Logger: o.Logger.With("component", "worker"), Env: we.env, Lifecycle: we.lifecycle,
		PermissionTimeout: we.permission, Pause: we.pause, MCP: we.mcp, QuestionTimeout: we.question, QuestionInline: we.questionInline,
		Factories: we.factories, Fail: we.fail, MaxRuntimes: maxRuntimes(o.MaxRuntimes),
		WorkflowCacheSize: we.workflowCache, ProbeCLIs: we.probeCLIs, Watchdog: we.watchdog, HostStore: o.HostStore, ProcessGuard: guard,
	})
}
