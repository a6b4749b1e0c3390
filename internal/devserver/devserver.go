// Package devserver runs an embedded Temporal server (SQLite file or in memory) and the
// Temporal Web UI inside the calling process. It backs `jam dev` and the integration tests.
//
// The server assembly follows the Temporal CLI's dev server (github.com/temporalio/cli,
// internal/devserver, MIT licensed), trimmed to what Jam needs.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const (
	clusterName   = "active"
	failoverBase  = 1
	defaultNSName = "default"
	// devClusterID is fixed so a persisted dev database always finds its own cluster.
	devClusterID = "6a616d2d-6465-7600-0000-000000000001"
)

// Options configure an embedded server. Addresses are host:port; a port of 0 picks a free one.
type Options struct {
	// FrontendAddress is where the Temporal gRPC frontend listens (default 127.0.0.1:7233).
	FrontendAddress string
	// UIAddress is where the Web UI listens; empty disables the UI.
	UIAddress string
	// DatabaseFile persists Temporal state; empty keeps it in memory (ephemeral).
	DatabaseFile string
	// Namespaces registered at start; "default" when empty.
	Namespaces []string
	// Logger receives the server's logs; it is filtered at LogLevel.
	Logger   *slog.Logger
	LogLevel slog.Level
	// SuggestContinueAsNewEvents, when positive, makes the server suggest continue-as-new
	// once a workflow's history holds that many events (Temporal's default is thousands).
	// Tests lower it to drive the long-lived workflows through continue-as-new.
	SuggestContinueAsNewEvents int
	// SearchAttributes are keyword search attributes registered in every namespace at
	// start, as an operator registers them on an external cluster.
	SearchAttributes []string
}

// Server is a running embedded Temporal server and, optionally, its Web UI.
type Server struct {
	server       temporal.Server
	ui           *uiserver.Server
	uiDone       chan error
	frontendAddr string
	uiAddr       string
	logLevel     *slog.LevelVar
	stopOnce     sync.Once
}

// FrontendAddress is the host:port the SDK client dials.
func (s *Server) FrontendAddress() string { return s.frontendAddr }

// UIAddress is the host:port of the Web UI, or "" when disabled.
func (s *Server) UIAddress() string { return s.uiAddr }

// UIURL is the Web UI's base URL, or "" when disabled.
func (s *Server) UIURL() string {
	if s.uiAddr == "" {
		return ""
	}
	return "http://" + s.uiAddr
}

// Start builds and starts the server; it returns once the frontend accepts connections.
func Start(opts Options) (*Server, error) {
	if opts.Logger == nil {
		return nil, errors.New("devserver: missing logger")
	}
	if opts.FrontendAddress == "" {
		opts.FrontendAddress = "127.0.0.1:7233"
	}
	if len(opts.Namespaces) == 0 {
		opts.Namespaces = []string{defaultNSName}
	}
	host, port, err := resolveAddress(opts.FrontendAddress)
	if err != nil {
		return nil, fmt.Errorf("temporal frontend address: %w", err)
	}
	s := &Server{frontendAddr: net.JoinHostPort(host, strconv.Itoa(port))}

	conf, err := buildConfig(host, port, opts)
	if err != nil {
		return nil, err
	}
	s.logLevel = &slog.LevelVar{}
	s.logLevel.Set(opts.LogLevel)
	logger := slogLogger{log: opts.Logger, level: s.logLevel}
	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("temporal authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("temporal claim mapper: %w", err)
	}
	staticHost := func(svc primitives.ServiceName) static.Hosts {
		return static.SingleLocalHost(net.JoinHostPort(host, strconv.Itoa(conf.Services[string(svc)].RPC.GRPCPort)))
	}
	dyn := dynamicconfig.StaticClient{
		// Workflows' mutable state kept in memory: about as many as a worker's workflow cache
		// (workers.DefaultWorkflowCacheSize). 8,096 held ~17 KiB for each of 8,096 dormant
		// rooms (jam dev RSS at 10,000 rooms: 704 MiB, 420 MiB with 1,024); a room out of
		// the cache loads its state from the database on its next task (wake p50 +10-15 ms).
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 1024,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		// Search attributes registered at start reach the frontend through the namespace
		// cache; its default 10 s refresh would refuse the first workflow starts.
		dynamicconfig.NamespaceCacheRefreshInterval.Key(): time.Second,
		// One partition per task queue: with the default four and one worker's two pollers,
		// tasks written to a partition nobody polls reach a poller only through the
		// forwarder, at 10 a second. 2,000 rooms bound at once took 70 s to register for that
		// alone (the process idle); one server needs no partitions.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
		// The history queues poll their shard at most 20 times a second by default; a
		// cluster spreads that over hundreds of shards, this server has one. Once a few
		// wakes had spent the burst, every activity and workflow task waited ~40 ms for the
		// next poll (a wake: 60-80 ms became 150-200 ms).
		dynamicconfig.TransferProcessorMaxPollRPS.Key():   1000,
		dynamicconfig.TimerProcessorMaxPollRPS.Key():      1000,
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key(): 1000,
	}
	if opts.SuggestContinueAsNewEvents > 0 {
		dyn[dynamicconfig.HistoryCountSuggestContinueAsNew.Key()] = opts.SuggestContinueAsNewEvents
	}
	server, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: staticHost(primitives.FrontendService),
			primitives.MatchingService: staticHost(primitives.MatchingService),
			primitives.HistoryService:  staticHost(primitives.HistoryService),
			primitives.WorkerService:   staticHost(primitives.WorkerService),
		}),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return nil, fmt.Errorf("build temporal server: %w", err)
	}
	if err := server.Start(); err != nil {
		return nil, fmt.Errorf("start temporal server: %w", err)
	}
	s.server = server
	if len(opts.SearchAttributes) > 0 {
		if err := s.addSearchAttributes(opts.Namespaces, opts.SearchAttributes); err != nil {
			_ = server.Stop()
			return nil, err
		}
	}

	if opts.UIAddress != "" {
		if err := s.startUI(opts.UIAddress); err != nil {
			_ = server.Stop()
			return nil, err
		}
	}
	return s, nil
}

func (s *Server) startUI(addr string) error {
	host, port, err := resolveAddress(addr)
	if err != nil {
		return fmt.Errorf("temporal ui address: %w", err)
	}
	s.uiAddr = net.JoinHostPort(host, strconv.Itoa(port))
	s.ui = uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: s.frontendAddr,
		EnableUI:            true,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		// The machine may be offline; the UI must not reach out for release news.
		DisableNewsFetch: true,
	}))
	s.uiDone = make(chan error, 1)
	go func() { s.uiDone <- s.ui.Start() }()
	// ui.Start blocks while serving, so readiness is observed by dialing the port.
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-s.uiDone:
			return fmt.Errorf("temporal ui on %s: %w", s.uiAddr, err)
		default:
		}
		conn, err := net.DialTimeout("tcp", s.uiAddr, 200*time.Millisecond)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			s.ui.Stop()
			return fmt.Errorf("temporal ui on %s did not start: %w", s.uiAddr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the UI, then the server. It is safe to call more than once.
func (s *Server) Stop() error {
	var err error
	s.stopOnce.Do(func() {
		// The server's internal workers complain while their frontend goes away first;
		// that is expected during a stop and only errors are worth showing.
		if s.logLevel != nil && s.logLevel.Level() < slog.LevelError {
			s.logLevel.Set(slog.LevelError)
		}
		if s.ui != nil {
			s.ui.Stop()
		}
		if s.server != nil {
			err = s.server.Stop()
		}
	})
	return err
}

func buildConfig(host string, frontendPort int, opts Options) (*config.Config, error) {
	httpPort, err := freePort(host)
	if err != nil {
		return nil, err
	}
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = host
	conf.Persistence.DefaultStore = "sqlite-default"
	conf.Persistence.VisibilityStore = "sqlite-default"
	conf.Persistence.NumHistoryShards = 1
	sqlConf, err := buildSQLConfig(opts)
	if err != nil {
		return nil, err
	}
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite-default": {SQL: sqlConf}}
	frontendAddr := net.JoinHostPort(host, strconv.Itoa(frontendPort))
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: failoverBase,
				RPCAddress:             frontendAddr,
				HTTPAddress:            net.JoinHostPort(host, strconv.Itoa(httpPort)),
				ClusterID:              devClusterID,
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{}
	for _, name := range []string{"frontend", "history", "matching", "worker"} {
		var svc config.Service
		svc.RPC.BindOnIP = host
		if name == "frontend" {
			svc.RPC.GRPCPort = frontendPort
			svc.RPC.HTTPPort = httpPort
		} else {
			p, err := freePort(host)
			if err != nil {
				return nil, err
			}
			svc.RPC.GRPCPort = p
		}
		conf.Services[name] = svc
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontendAddr
	return &conf, nil
}

func buildSQLConfig(opts Options) (*config.SQL, error) {
	conf := config.SQL{PluginName: sqliteplugin.PluginName}
	if opts.DatabaseFile == "" {
		conf.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		// A unique name keeps two in-memory servers in one process (tests) apart.
		conf.DatabaseName = fmt.Sprintf("jam-%d-%d", os.Getpid(), time.Now().UnixNano())
	} else {
		// WAL with synchronous=NORMAL: a commit survives a crash of the process (the case
		// `jam dev` must survive) without an fsync per commit, which dominated the latency of
		// every workflow task on the rollback journal.
		conf.ConnectAttributes = map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "NORMAL"}
		conf.DatabaseName = opts.DatabaseFile
		if _, err := os.Stat(opts.DatabaseFile); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(opts.DatabaseFile), 0o700); err != nil {
				return nil, fmt.Errorf("temporal database directory: %w", err)
			}
			if err := sqliteschema.SetupSchema(&conf); err != nil {
				return nil, fmt.Errorf("temporal database schema %s: %w", opts.DatabaseFile, err)
			}
		} else if err != nil {
			return nil, fmt.Errorf("temporal database %s: %w", opts.DatabaseFile, err)
		}
	}
	namespaces := make([]*sqliteschema.NamespaceConfig, 0, len(opts.Namespaces))
	for _, ns := range opts.Namespaces {
		nsConf, err := sqliteschema.NewNamespaceConfig(clusterName, ns, false, nil)
		if err != nil {
			return nil, fmt.Errorf("temporal namespace %s: %w", ns, err)
		}
		namespaces = append(namespaces, nsConf)
	}
	if err := sqliteschema.CreateNamespaces(&conf, namespaces...); err != nil {
		return nil, fmt.Errorf("temporal namespaces: %w", err)
	}
	return &conf, nil
}

// resolveAddress splits host:port and replaces port 0 with a free port on that host.
func resolveAddress(addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if host == "" {
		host = "127.0.0.1"
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("invalid port %q", portText)
	}
	if port == 0 {
		if port, err = freePort(host); err != nil {
			return "", 0, err
		}
	}
	return host, port, nil
}

// addSearchAttributes registers keyword search attributes in each namespace, skipping those
// a persisted database already has.
func (s *Server) addSearchAttributes(namespaces, names []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(s.frontendAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("temporal operator connection: %w", err)
	}
	defer func() { _ = conn.Close() }()
	op := operatorservice.NewOperatorServiceClient(conn)
	for _, ns := range namespaces {
		var have *operatorservice.ListSearchAttributesResponse
		for {
			// The frontend may still be joining its cluster right after Start.
			have, err = op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("list search attributes of %s: %w", ns, err)
		}
		add := map[string]enumspb.IndexedValueType{}
		for _, name := range names {
			if _, ok := have.GetCustomAttributes()[name]; !ok {
				add[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
			}
		}
		if len(add) == 0 {
			continue
		}
		if _, err := op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: ns, SearchAttributes: add}); err != nil {
			return fmt.Errorf("add search attributes to %s: %w", ns, err)
		}
	}
	// Start returns once a query naming every attribute is accepted: the frontend knows them.
	wf := workflowservice.NewWorkflowServiceClient(conn)
	clauses := make([]string, len(names))
	for i, name := range names {
		clauses[i] = fmt.Sprintf("%s = 'x'", name)
	}
	query := strings.Join(clauses, " AND ")
	for _, ns := range namespaces {
		for {
			_, err := wf.ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: ns, Query: query, PageSize: 1})
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("search attributes of %s not in effect: %w", ns, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}
