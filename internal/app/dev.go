package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/devserver"
	"github.com/jam-dev/jam/internal/privatefile"
	"github.com/jam-dev/jam/internal/roomctl"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/workers"
)

// RunDev runs everything in one process until ctx ends: an embedded Temporal server (SQLite
// file in the data directory, or memory with Ephemeral) with its Web UI, the store on SQLite,
// a worker for this node and the API. Shutdown goes API, worker (running activities get
// workers.DefaultStopTimeout to finish), Temporal, store.
func RunDev(ctx context.Context, o Options) (err error) {
	if err := o.checkDevListen(); err != nil {
		return err
	}
	if err := startPprof(ctx, o.PprofListen, o.Logger); err != nil {
		return err
	}
	lock, err := o.claimHome()
	if err != nil {
		return err
	}
	defer lock.release()
	log := o.Logger
	token, err := OperatorToken(o.APIToken, o.layout().APITokenFile())
	if err != nil {
		return err
	}

	dbURL := o.DatabaseURL
	temporalFile := o.TemporalDB
	if temporalFile == "" {
		temporalFile = o.layout().TemporalFile()
	}
	if o.Ephemeral {
		tmp, err := os.MkdirTemp("", "jam-dev-")
		if err != nil {
			return fmt.Errorf("ephemeral store directory: %w", err)
		}
		defer os.RemoveAll(tmp)
		temporalFile = ""
		if dbURL == "" {
			dbURL = "sqlite:" + filepath.Join(tmp, "jam.db")
		}
	}
	if dbURL == "" {
		dbURL = "sqlite:" + o.layout().StoreFile()
	}
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return err
	}

	suggestCAN, err := devSuggestContinueAsNew(os.Getenv)
	if err != nil {
		return err
	}
	// The embedded server's system workers start the process's first Temporal worker, which
	// sizes the SDK's one workflow cache: set Jam's bound before them, or it is never applied
	// (10,000 dormant rooms stayed resident: +290 MiB of RSS, make bench).
	cache, err := workflowCacheSize(os.Getenv)
	if err != nil {
		return err
	}
	workers.LimitWorkflowCache(cache)
	ts, err := devserver.Start(devserver.Options{
		FrontendAddress:            o.TemporalListen,
		UIAddress:                  o.UIListen,
		DatabaseFile:               temporalFile,
		Namespaces:                 []string{o.Namespace},
		Logger:                     log.With("component", "temporal-server"),
		LogLevel:                   o.TemporalLogLevel,
		SuggestContinueAsNewEvents: suggestCAN,
		SearchAttributes:           contract.SearchAttributeNames(),
	})
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := ts.Stop(); stopErr != nil {
			log.Warn("temporal server stop", "error", stopErr)
		}
	}()

	tc, err := dialTemporal(ctx, ts.FrontendAddress(), o.Namespace, log)
	if err != nil {
		return err
	}
	defer tc.Close()

	wk, err := startWorkers(ctx, o, tc, st)
	if err != nil {
		return err
	}
	defer wk.Stop()

	starter, err := roomStarter(tc, st)
	if err != nil {
		return err
	}
	bandCtx, stopBand := context.WithCancel(context.Background())
	defer stopBand()
	b, err := runBand(bandCtx, st, starter, log)
	if err != nil {
		return err
	}
	srv, err := startAPI(api.Config{
		Store: st, Temporal: tc, Band: b, Lifecycle: starter, Sessions: starter, Hosts: &roomctl.Hosts{Client: tc}, TemporalUI: ts.UIURL(),
		Namespace: o.Namespace, Token: token.Value, Version: o.Version, Logger: log.With("component", "api"),
	}, o.Listen, o.HTTP)
	if err != nil {
		return err
	}

	// The jam CLI run with this data directory calls the address written here, so
	// `--listen 127.0.0.1:0` needs no JAM_URL. The home lock makes this process the file's
	// only writer while it runs; a clean stop removes it, and one a crash left names a dead
	// address, which the CLI's connection error traces back to this file.
	apiURL := clientURL(srv.listener.Addr())
	urlFile := o.layout().APIURLFile()
	if err := privatefile.Replace(urlFile, []byte(apiURL+"\n")); err != nil {
		if stopErr := srv.shutdown(); stopErr != nil {
			log.Warn("api shutdown", "error", stopErr)
		}
		return fmt.Errorf("write the API address to %s: %w", urlFile, err)
	}
	defer removeAPIURL(urlFile, apiURL, log)

	tokenWhere := token.File
	if tokenWhere == "" {
		tokenWhere = "from JAM_API_TOKEN"
	}
	ui := ts.UIURL()
	if ui == "" {
		ui = "(disabled)"
	}
	storeDesc := dbURL
	if o.Ephemeral {
		storeDesc += " (ephemeral)"
	}
	fmt.Fprintf(o.Out, `Jam dev is running.
  Jam API:          %s
  Temporal:         %s (namespace %s)
  Temporal Web UI:  %s
  Operator token:   %s
  Data directory:   %s
  Store:            %s
  Node:             %s (task queue %s)
Press Ctrl-C to stop.
`, srv.URL(), ts.FrontendAddress(), o.Namespace, ui, tokenWhere, o.Home, storeDesc, o.Node, contract.NodeTaskQueue(o.Node))

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-srv.done:
		runErr = fmt.Errorf("api server stopped: %w", runErr)
	case runErr = <-wk.Fatal():
	}
	log.Info("shutting down: api, worker, temporal, store")
	if err := srv.shutdown(); err != nil {
		log.Warn("api shutdown", "error", err)
	}
	wk.Stop()
	return runErr
}

// EnvDevSuggestContinueAsNew lowers the history length at which jam dev's embedded Temporal
// suggests continue-as-new. It is a test knob (the workflow history recorder uses it to
// capture RoomSession and RuntimeHost continuing as new within a short scenario); operators
// never need it, and production servers take the setting from their own dynamic config.
const EnvDevSuggestContinueAsNew = "JAM_DEV_SUGGEST_CONTINUE_AS_NEW_EVENTS"

func devSuggestContinueAsNew(getenv func(string) string) (int, error) {
	return positiveEnv(getenv, EnvDevSuggestContinueAsNew, "events")
}

// clientURL is the base URL a client on this machine calls to reach a listener: an
// unspecified address (0.0.0.0, ::) is reached on loopback.
func clientURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// removeAPIURL deletes the API address file at shutdown if it still names this process's
// address (it is left alone if anything replaced it).
func removeAPIURL(file, url string, log *slog.Logger) {
	b, err := os.ReadFile(file)
	if err != nil || strings.TrimSpace(string(b)) != url {
		return
	}
	if err := os.Remove(file); err != nil {
		log.Warn("remove the API address file", "file", file, "error", err)
	}
}
