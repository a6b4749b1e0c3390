package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
)

func newNodeCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "Nodes: the machines that run workers"}
	cf := addClientFlags(cmd)

	list := listCmd(cf, "list", "List nodes with their state, load and capacity, and the age of their last heartbeat", cobra.NoArgs, fixed("/v1/nodes"),
		"NAME\tSTATE\tRUNTIMES\tSANDBOX\tHEARTBEAT\tHOSTNAME\tPID\tVERSION\tTASK QUEUE",
		func(out api.NodeList) [][]string {
			rows := make([][]string, len(out.Items))
			for i, n := range out.Items {
				rows[i] = []string{n.Name, string(n.State), load(n), sandboxCell(n), ago(n.HeartbeatAgeSeconds), n.Hostname, strconv.Itoa(n.PID), n.Version, n.TaskQueue}
			}
			return rows
		})
	show := &cobra.Command{
		Use: "show NAME", Short: "Show one node", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodGet, "/v1/nodes/"+url.PathEscape(args[0]), nil)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), raw)
		},
	}
	probe := &cobra.Command{
		Use:   "probe NAME",
		Short: "Ask the node's own worker, through its task queue, to describe its machine",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodPost, "/v1/nodes/"+url.PathEscape(args[0])+"/probe", nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.NodeProbeBody) error {
				r := out.Report
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "node %s answered: pid %d on %s (%s/%s, %s), jam %s\ndata directory %s, %.1f GiB free\nworkflow %s run %s\n",
					r.Node, r.PID, r.Hostname, r.OS, r.Arch, r.GoVersion, r.Version, r.DataDir,
					float64(r.DataDirFreeBytes)/(1<<30), out.WorkflowID, out.RunID)
				return err
			})
		},
	}
	drain := func(use, short, long, path string) *cobra.Command {
		return &cobra.Command{
			Use: use + " NAME", Short: short, Long: long, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				raw, err := cf.call(cmd, http.MethodPost, "/v1/nodes/"+url.PathEscape(args[0])+"/"+path, nil)
				if err != nil {
					return err
				}
				return render(cf, cmd, raw, func(n api.NodeBody) error {
					_, err := fmt.Fprintf(cmd.OutOrStdout(), "node %s is %s with %s runtimes\n", n.Name, n.State, load(n))
					return err
				})
			},
		}
	}
	cmd.AddCommand(list, show, probe,
		drain("drain", "Take a node out of service: it takes no new runtime",
			`A drained node takes no new runtime: wakes go to other nodes. Its live runtimes are
reaped when idle. A host-native room whose workspace is on the node's disk keeps waking there
(its state cannot move); start it fresh to move it.`, "drain"),
		drain("undrain", "Put a drained node back in service", "", "undrain"))
	return cmd
}

// sandboxCell is the node's sbx support for the list ("-" before its first probe).
func sandboxCell(n api.NodeBody) string {
	if n.Sandbox == "" {
		return "-"
	}
	return string(n.Sandbox)
}

// load is a node's "runtimes/capacity" ("3/8"; "3/-" without a limit).
func load(n api.NodeBody) string {
	if n.MaxRuntimes <= 0 {
		return strconv.Itoa(n.Runtimes) + "/-"
	}
	return fmt.Sprintf("%d/%d", n.Runtimes, n.MaxRuntimes)
}
