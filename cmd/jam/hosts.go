package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/workflows"
)

func newHostCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "host", Short: "Runtime hosts: the sandboxes sandboxed sessions run in, and host-scope control"}
	cf := addClientFlags(cmd)
	var agent string
	list := &cobra.Command{
		Use: "list", Short: "List runtime hosts", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := "/v1/hosts"
			if agent != "" {
				path += "?agent=" + url.QueryEscape(agent)
			}
			raw, err := cf.call(cmd, http.MethodGet, path, nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.HostList) error {
				rows := make([][]string, len(out.Items))
				for i, h := range out.Items {
					rows[i] = []string{h.ID.String(), string(h.Placement), string(h.State), h.Node, h.SandboxName, fmt.Sprint(len(h.Members))}
				}
				return table(cmd.OutOrStdout(), "HOST\tPLACEMENT\tSTATE\tNODE\tSANDBOX\tMEMBERS", rows)
			})
		},
	}
	list.Flags().StringVar(&agent, "agent", "", "only this agent's hosts")
	show := &cobra.Command{
		Use: "show HOST_ID", Short: "Show one host, its members and its lease", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showJSON(cf, cmd, "/v1/hosts/"+url.PathEscape(args[0]))
		},
	}
	var discard bool
	control := &cobra.Command{
		Use:   "control HOST_ID " + strings.Join(domain.HostActions.Strings(), "|"),
		Short: "Stop, restart or reset the sandbox of a host; the scope is every member of the host",
		Long: `Run a host-scope control. Every member of the host (from its durable membership) is
stopped and recorded dormant, then the sandbox is parked (stop, restart) or destroyed once
after its ownership is proven (reset_sandbox); restart and reset_sandbox bring back only the
members that were live. This is the only way to stop or reset a Shared host.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodPost, "/v1/hosts/"+url.PathEscape(args[0])+"/control",
				api.HostControlRequest{Action: domain.HostAction(args[1]), DiscardChanges: discard})
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(res workflows.ControlResult) error { return printControl(cmd, res) })
		},
	}
	control.Flags().BoolVar(&discard, "discard-changes", false, "confirm a reset may destroy a private clone's changes that live only in the sandbox")
	cmd.AddCommand(list, show, control)
	return cmd
}

func printControl(cmd *cobra.Command, res workflows.ControlResult) error {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%s: %d member(s)", res.Action, len(res.Members))
	if res.SandboxDestroyed {
		fmt.Fprint(w, ", sandbox destroyed")
	}
	fmt.Fprintln(w)
	for _, m := range res.Members {
		state := "was dormant"
		if m.WasLive {
			state = "was live"
		}
		if m.Restarted {
			state += ", restarting"
		}
		fmt.Fprintf(w, "  %s %s (%s)\n", m.RuntimeSession, m.Alias, state)
	}
	return nil
}
