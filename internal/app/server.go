package app

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/roomctl"
)

// RunServer serves the API against Postgres and an external Temporal until ctx ends. It
// starts even while Temporal is down (the client connects lazily) and /readyz says so.
func RunServer(ctx context.Context, o Options) error {
	if err := startPprof(ctx, o.PprofListen, o.Logger); err != nil {
		return err
	}
	if err := o.prepareHome(); err != nil {
		return err
	}
	token, err := OperatorToken(o.APIToken, o.layout().APITokenFile())
	if err != nil {
		return err
	}
	st, err := openProductionStore(ctx, o.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	tc, err := client.NewLazyClient(clientOptions(o.TemporalAddress, o.Namespace, o.Logger))
	if err != nil {
		return fmt.Errorf("temporal client for %s: %w", o.TemporalAddress, err)
	}
	defer tc.Close()
	starter, err := roomStarter(tc, st)
	if err != nil {
		return err
	}
	bandCtx, stopBand := context.WithCancel(context.Background())
	defer stopBand()
	b, err := runBand(bandCtx, st, starter, o.Logger)
	if err != nil {
		return err
	}
	srv, err := startAPI(api.Config{
		Store: st, Temporal: tc, Band: b, Lifecycle: starter, Sessions: starter, Hosts: &roomctl.Hosts{Client: tc}, TemporalUI: o.TemporalUIURL,
		Namespace: o.Namespace, Token: token.Value, Version: o.Version,
		Logger: o.Logger.With("component", "api"),
	}, o.Listen, o.HTTP)
	if err != nil {
		return err
	}
	o.Logger.Info("jam server listening", "url", srv.URL(), "temporal", o.TemporalAddress, "namespace", o.Namespace)
	select {
	case <-ctx.Done():
	case err := <-srv.done:
		return fmt.Errorf("api server stopped: %w", err)
	}
	if err := srv.shutdown(); err != nil {
		o.Logger.Warn("api shutdown", "error", err)
	}
	return nil
}

// RunWorker runs one node's workers against Postgres and an external Temporal until ctx
// ends, then lets running activities finish within workers.DefaultStopTimeout.
func RunWorker(ctx context.Context, o Options) error {
	if err := startPprof(ctx, o.PprofListen, o.Logger); err != nil {
		return err
	}
	lock, err := o.claimHome()
	if err != nil {
		return err
	}
	defer lock.release()
	st, err := openProductionStore(ctx, o.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	tc, err := dialTemporal(ctx, o.TemporalAddress, o.Namespace, o.Logger)
	if err != nil {
		return err
	}
	defer tc.Close()
	// Jam's workflows upsert its search attributes: on a namespace without them every
	// workflow task would fail, so the node refuses to start and says how to fix it.
	if err := contract.EnsureSearchAttributes(ctx, tc, o.Namespace, false); err != nil {
		return err
	}
	wk, err := startWorkers(ctx, o, tc, st)
	if err != nil {
		return err
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-wk.Fatal():
	}
	o.Logger.Info("stopping workers", "node", o.Node)
	wk.Stop()
	return runErr
}
