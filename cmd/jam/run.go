package main

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jam-dev/jam/internal/app"
	"github.com/jam-dev/jam/internal/sandbox"
)

// Default addresses (docs/configuration.md, "Variables and flags").
const (
	defaultListen           = "127.0.0.1:7780"
	defaultTemporalAddress  = "127.0.0.1:7233"
	defaultTemporalListen   = "127.0.0.1:7233"
	defaultUIListen         = "127.0.0.1:8233"
	defaultTemporalNS       = "default"
	defaultTemporalLogLevel = "warn"
)

func addDatabaseFlag(fs *pflag.FlagSet, v *string, usage string) {
	fs.StringVar(v, "database-url", "", usage)
	bindEnv(fs, "database-url", "JAM_DATABASE_URL")
}

func addNamespaceFlag(fs *pflag.FlagSet, v *string) {
	fs.StringVar(v, "temporal-namespace", defaultTemporalNS, "Temporal namespace")
	bindEnv(fs, "temporal-namespace", "JAM_TEMPORAL_NAMESPACE")
}

func addListenFlag(fs *pflag.FlagSet, v *string) {
	fs.StringVar(v, "listen", defaultListen, "Jam API address")
	bindEnv(fs, "listen", "JAM_LISTEN")
}

// finish fills the options every run command shares from the process and the globals.
func finish(o *app.Options, g *globals, cmd *cobra.Command) {
	o.APIToken = os.Getenv("JAM_API_TOKEN")
	o.Version, o.Logger, o.Out = version, g.logger, cmd.OutOrStdout()
	if exe, err := os.Executable(); err == nil {
		o.JamExecutable = exe // providers run it as `jam mcp`
	}
}

func addPprofFlag(fs *pflag.FlagSet, o *app.Options) {
	fs.StringVar(&o.PprofListen, "pprof-listen", "", "serve Go's pprof profiles on this loopback address (empty: off)")
	bindEnv(fs, "pprof-listen", "JAM_PPROF_LISTEN")
}

func addNodeFlag(fs *pflag.FlagSet, o *app.Options) {
	fs.StringVar(&o.Node, "node", defaultNode(), "this machine's node name (task queue jam.node.<node>)")
	bindEnv(fs, "node", "JAM_NODE")
	fs.StringVar(&o.Sbx, "sbx", "", "absolute path of the Docker Sandboxes CLI (default: sbx on PATH)")
	bindEnv(fs, "sbx", sandbox.EnvSbx)
}

// addMaxRuntimesFlag: def is the flag's default (-1: from the machine's cores and memory).
func addMaxRuntimesFlag(fs *pflag.FlagSet, o *app.Options, def int, usage string) {
	fs.IntVar(&o.MaxRuntimes, "max-runtimes", def, usage)
	bindEnv(fs, "max-runtimes", "JAM_MAX_RUNTIMES")
}

func newDevCmd(g *globals) *cobra.Command {
	var o app.Options
	var temporalLogLevel string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything in one process: embedded Temporal + Web UI, API, worker, SQLite store",
		Long: `Run Jam in one process with no Docker and no Postgres: an embedded Temporal server
persisted in a SQLite file in the data directory (so workflows survive a restart), the
Temporal Web UI, the Jam API, a worker for this node, and the Jam store on SQLite.

Addresses ending in :0 pick a free port; the chosen addresses are printed at start, and the
API's is written to $JAM_HOME/api-url (removed at a clean stop), where the jam CLI run with
the same JAM_HOME finds it without JAM_URL. An address already in use is refused before
anything starts. The Temporal frontend and Web UI answer without Jam's token (the UI can
terminate workflows), so they listen on loopback only unless --allow-remote-ui is given.
Ctrl-C stops the API, then the worker (running activities get 30 s), then Temporal.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level, err := parseLevel(temporalLogLevel)
			if err != nil {
				return err
			}
			o.TemporalLogLevel = level
			finish(&o, g, cmd)
			return app.RunDev(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	addHomeFlag(fs, &o.Home)
	addListenFlag(fs, &o.Listen)
	addPprofFlag(fs, &o)
	addDatabaseFlag(fs, &o.DatabaseURL, "store URL (default: SQLite $JAM_HOME/jam.db)")
	fs.StringVar(&o.TemporalListen, "temporal-listen", defaultTemporalListen, "embedded Temporal frontend address")
	bindEnv(fs, "temporal-listen", "JAM_DEV_TEMPORAL_LISTEN")
	fs.StringVar(&o.UIListen, "ui-listen", defaultUIListen, "Temporal Web UI address (empty disables the UI)")
	bindEnv(fs, "ui-listen", "JAM_DEV_UI_LISTEN")
	fs.BoolVar(&o.AllowRemoteUI, "allow-remote-ui", false, "allow non-loopback --temporal-listen and --ui-listen: anyone who reaches them can read every workflow and terminate or signal it, with no token")
	bindEnv(fs, "allow-remote-ui", app.EnvAllowRemoteUI)
	addNamespaceFlag(fs, &o.Namespace)
	addNodeFlag(fs, &o)
	addMaxRuntimesFlag(fs, &o, 0, "live runtimes this node carries at most (0: no limit; -1: one per 256 MiB of memory, at most 32 per core)")
	fs.StringVar(&o.TemporalDB, "temporal-db", "", "embedded Temporal's SQLite file (default $JAM_HOME/temporal.db)")
	bindEnv(fs, "temporal-db", "JAM_DEV_TEMPORAL_DB")
	fs.BoolVar(&o.Ephemeral, "ephemeral", false, "keep Temporal in memory and the store in a temporary file")
	bindEnv(fs, "ephemeral", "JAM_DEV_EPHEMERAL")
	fs.StringVar(&temporalLogLevel, "temporal-log-level", defaultTemporalLogLevel, "log level of the embedded Temporal server")
	bindEnv(fs, "temporal-log-level", "JAM_DEV_TEMPORAL_LOG_LEVEL")
	return cmd
}

func addTemporalAddressFlag(fs *pflag.FlagSet, v *string) {
	fs.StringVar(v, "temporal-address", defaultTemporalAddress, "Temporal frontend address")
	bindEnv(fs, "temporal-address", "JAM_TEMPORAL_ADDRESS")
}

// addProductionFlags are the flags jam server and jam worker share: a data directory,
// Postgres and an external Temporal.
func addProductionFlags(fs *pflag.FlagSet, o *app.Options) {
	addPprofFlag(fs, o)
	addHomeFlag(fs, &o.Home)
	addDatabaseFlag(fs, &o.DatabaseURL, "Postgres URL (required)")
	addTemporalAddressFlag(fs, &o.TemporalAddress)
	addNamespaceFlag(fs, &o.Namespace)
}

func newServerCmd(g *globals) *cobra.Command {
	var o app.Options
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Serve the Jam API against Postgres and an external Temporal",
		Long: `Serve the REST control API. Needs a migrated Postgres (JAM_DATABASE_URL, see
` + "`jam migrate up`" + `) and a Temporal cluster. The operator token is JAM_API_TOKEN, else the
token file in the data directory (generated on first start, mode 0600).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			finish(&o, g, cmd)
			return app.RunServer(cmd.Context(), o)
		},
	}
	addProductionFlags(cmd.Flags(), &o)
	addListenFlag(cmd.Flags(), &o.Listen)
	cmd.Flags().StringVar(&o.TemporalUIURL, "temporal-ui-url", "", "Temporal Web UI base URL for workflow links in API answers (e.g. http://127.0.0.1:8233)")
	bindEnv(cmd.Flags(), "temporal-ui-url", "JAM_TEMPORAL_UI_URL")
	return cmd
}

func newWorkerCmd(g *globals) *cobra.Command {
	var o app.Options
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the Temporal workers of one node (machine)",
		Long: `Run the workers of one node: the shared task queue ` + "`jam`" + ` and the node's own
` + "`jam.node.<node>`" + `. The node registers in the store and heartbeats every 5 s (stale after
15 s without one). Run one per machine that runs agents; a restarted worker with the same node
name serves the same queue.

Wakes place a room's runtime on the live node with the smallest share of its capacity
(--max-runtimes) in use; a node without a limit counts as large as the largest limited one;
a host-native room stays on the node whose disk holds its workspace. ` + "`jam node drain`" + ` stops
new runtimes landing on a node.

--host-store puts the node's runtime-host roots (workspaces, provider state, checkpoints) in
a directory of a shared filesystem instead of the data directory. Nodes that mount the same
store at the same path share it: a host-native room whose provider keeps its state in its
host root (Claude Code) then runs on another of them when its node is stale, draining or
full, on the same provider session, and a sandboxed room's runtime host moves to another of
them (with sbx) once its node is fenced, or parked off a draining node. Such a node kills those rooms' runtimes when it could
not record a heartbeat for 10 s; the others take the rooms only after 20 s. At start it stops
its sandboxes whose hosts moved away meanwhile.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			finish(&o, g, cmd)
			return app.RunWorker(cmd.Context(), o)
		},
	}
	addProductionFlags(cmd.Flags(), &o)
	addNodeFlag(cmd.Flags(), &o)
	addMaxRuntimesFlag(cmd.Flags(), &o, -1, "live runtimes this node carries at most (-1: one per 256 MiB of memory, at most 32 per core; 0: no limit)")
	cmd.Flags().StringVar(&o.HostStore, "host-store", "", "directory of runtime-host roots shared with other nodes, mounted at the same path on each (default: runtime-hosts in the data directory, this node's own)")
	bindEnv(cmd.Flags(), "host-store", "JAM_HOST_STORE")
	return cmd
}
