package main

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
)

func newNodeCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "Nodes: the machines that run workers"}
	cf := addClientFlags(cmd)

	list := listCmd(cf, "list", "List nodes with their state, load and capacity, and the age of their last heartbeat", cobra.NoArgs, fixed("/v1/nodes"),
		"NAME\tSTATE\tRUNTIMES\tSANDBOX\tCLIS\tHOST STORE\tHEARTBEAT\tHOSTNAME\tPID\tVERSION\tTASK QUEUE",
		func(out api.NodeList) [][]string {
			rows := make([][]string, len(out.Items))
			for i, n := range out.Items {
				rows[i] = []string{n.Name, string(n.State), load(n), sandboxCell(n), clisCell(n.CLIs), storeCell(n.HostStore),
					ago(n.HeartbeatAgeSeconds), n.Hostname, strconv.Itoa(n.PID), n.Version, n.TaskQueue}
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
		Short: "Ask the node's own worker, through its task queue, to describe its machine and resolve its provider CLIs again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodPost, "/v1/nodes/"+url.PathEscape(args[0])+"/probe", nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.NodeProbeBody) error {
				r := out.Report
				w := cmd.OutOrStdout()
				if _, err := fmt.Fprintf(w, "node %s answered: pid %d on %s (%s/%s, %s), jam %s\ndata directory %s, %.1f GiB free\n",
					r.Node, r.PID, r.Hostname, r.OS, r.Arch, r.GoVersion, r.Version, r.DataDir,
					float64(r.DataDirFreeBytes)/(1<<30)); err != nil {
					return err
				}
				if r.CLIsUnanswered != "" {
					if _, err := fmt.Fprintln(w, "  "+r.CLIsUnanswered); err != nil {
						return err
					}
				}
				for _, c := range r.CLIs {
					line := fmt.Sprintf("  %s %s %s (%s)", c.Command, cmp.Or(c.Version, "(no version)"), c.Path, c.Source)
					if c.Problem != "" {
						line = fmt.Sprintf("  %s: %s", c.Command, c.Problem)
					}
					if _, err := fmt.Fprintln(w, line); err != nil {
						return err
					}
				}
				_, err := fmt.Fprintf(w, "workflow %s run %s\n", out.WorkflowID, out.RunID)
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
(its state cannot move); start it fresh to move it. Where the node shares its host store
(jam worker --host-store) with a live node that can take them, rooms whose state is all in
their host root (Claude Code) move: live runtimes stop at their next turn boundary and wake
on the other node.`, "drain"),
		drain("undrain", "Put a drained node back in service", "", "undrain"))
	return cmd
}

// clisCell names the provider CLIs the node can run, with their versions ("-" before its
// first probe); `jam node probe` says why the others cannot.
func clisCell(clis []domain.NodeCLI) string {
	if clis == nil {
		return "-"
	}
	var ok []string
	for _, c := range clis {
		if c.Problem == "" {
			ok = append(ok, strings.TrimSuffix(c.Command+" "+c.Version, " "))
		}
	}
	if len(ok) == 0 {
		return "none"
	}
	return strings.Join(ok, ", ")
}

// storeCell names the node's host store by the start of its id, so nodes that share one
// show the same ("-": the node's own, shared with none); `jam node show` has it whole.
func storeCell(store string) string {
	id, _, ok := strings.Cut(store, ":")
	if !ok || id == "" {
		return "-"
	}
	return id[:min(len(id), 8)]
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
