package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
)

func newPermissionCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use: "permission", Aliases: []string{"permissions"},
		Short: "Runtime permission requests: list them, allow or deny them",
	}
	cf := addClientFlags(cmd)
	var state, agent, room string
	var limit int
	list := &cobra.Command{
		Use: "list", Short: "List permission requests, newest first", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, err := cf.call(cmd, http.MethodGet, "/v1/permissions?"+filterQuery(map[string]string{"state": state, "agent": agent, "room": room}, limit), nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.PermissionList) error {
				rows := make([][]string, len(out.Items))
				for i, p := range out.Items {
					decision := "-"
					if p.Decision != nil {
						decision = string(*p.Decision)
					}
					rows[i] = []string{p.ID.String(), p.AgentID.String(), string(p.State), decision, p.ToolKey, p.Title}
				}
				return table(cmd.OutOrStdout(), "ID\tAGENT\tSTATE\tDECISION\tTOOL\tTITLE", rows)
			})
		},
	}
	list.Flags().StringVar(&state, "state", "", "only requests in this state: "+strings.Join(domain.PermissionStates.Strings(), ", "))
	list.Flags().StringVar(&agent, "agent", "", "only this agent's requests")
	list.Flags().StringVar(&room, "room", "", "only this room's requests")
	list.Flags().IntVar(&limit, "limit", 0, "at most this many (default 100, at most 500)")
	show := &cobra.Command{
		Use: "show ID", Short: "Show one permission request", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showJSON(cf, cmd, "/v1/permissions/"+url.PathEscape(args[0]))
		},
	}
	decisions := domain.PermissionDecisions.Strings()
	decide := &cobra.Command{
		Use:   "decide ID " + strings.Join(decisions, "|"),
		Short: "Decide a pending request (allow_always also allows the agent's later requests of the same tool)",
		Args:  cobra.ExactArgs(2),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 1 {
				return decisions, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodPost, "/v1/permissions/"+url.PathEscape(args[0])+"/decision",
				api.DecidePermissionRequest{Decision: domain.PermissionDecision(args[1])})
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(p api.PermissionBody) error {
				decision := string(p.State)
				if p.Decision != nil {
					decision = string(*p.Decision)
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: %s (%s)\n", p.ID, p.State, decision)
				return err
			})
		},
	}
	cmd.AddCommand(list, show, decide)
	return cmd
}
