package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
)

// globals are the flags every command has.
type globals struct {
	logLevel string
	logger   *slog.Logger
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "jam",
		Short: "Jam keeps coding agents running on behalf of chat rooms",
		Long: `Jam keeps coding agents (Codex, Claude Code, Copilot, ACP agents) running on behalf of
chat rooms, each room with its own runtime, and every lifecycle operation a Temporal workflow.

Run everything locally with ` + "`jam dev`" + `; in production run ` + "`jam server`" + ` and one
` + "`jam worker`" + ` per machine against Postgres and a Temporal cluster. The other commands
are a client of the REST API. They call --url (JAM_URL), else the address a running
` + "`jam dev`" + ` wrote to its data directory (JAM_HOME: give the CLI the same one), else
http://127.0.0.1:7780; with --token (JAM_TOKEN), else the token jam dev wrote there.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd); err != nil {
				return err
			}
			level, err := parseLevel(g.logLevel)
			if err != nil {
				return err
			}
			g.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			return nil
		},
	}
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	bindEnv(root.PersistentFlags(), "log-level", "JAM_LOG_LEVEL")
	root.SetVersionTemplate(fmt.Sprintf("jam %s\n", version))

	root.AddGroup(&cobra.Group{ID: "run", Title: "Run Jam:"}, &cobra.Group{ID: "client", Title: "Use the API:"})
	for _, c := range []*cobra.Command{newDevCmd(g), newServerCmd(g), newWorkerCmd(g), newMigrateCmd(g), newMCPCmd(g)} {
		c.GroupID = "run"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newAgentCmd(g), newTemplateCmd(g), newRoomCmd(g), newMessageCmd(g),
		newSessionCmd(g), newPermissionCmd(g), newQuestionCmd(g), newNodeCmd(g), newSandboxCmd(g), newHostCmd(g), newWorkspaceCmd(g), newSettingCmd(g), newOpsCmd(g), operationCmd()} {
		c.GroupID = "client"
		root.AddCommand(c)
	}
	root.AddCommand(newProcessGuardCmd(g))
	return root
}
