package main

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
)

func newSessionCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "session", Short: "Host sessions: each room's runtime configuration and generations"}
	cf := addClientFlags(cmd)
	var agent, room string
	list := &cobra.Command{
		Use: "list", Short: "List host sessions", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if agent != "" {
				q.Set("agent", agent)
			}
			if room != "" {
				q.Set("room", room)
			}
			raw, err := cf.call(cmd, http.MethodGet, "/v1/sessions?"+q.Encode(), nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.SessionList) error {
				rows := make([][]string, len(out.Items))
				for i, s := range out.Items {
					pending := "-"
					if s.PendingChange != nil {
						pending = string(s.PendingChange.Status)
					}
					// Why it cannot start (failed), or the caveat it runs with (degraded).
					problem := "-"
					switch {
					case s.Failure != nil:
						problem = string(s.Failure.Class) + ": " + s.Failure.Reason
					case s.Runtime != nil && s.Runtime.Warning != "":
						problem = "warning: " + s.Runtime.Warning
					}
					rows[i] = []string{s.RuntimeSessionID.String(), s.Alias, string(s.Presence),
						fmt.Sprintf("%d/%d", s.EffectiveGeneration, s.DesiredGeneration), pending, problem}
				}
				return table(cmd.OutOrStdout(), "RUNTIME SESSION\tALIAS\tPRESENCE\tEFFECTIVE/DESIRED\tPENDING\tPROBLEM", rows)
			})
		},
	}
	list.Flags().StringVar(&agent, "agent", "", "only this agent's sessions")
	list.Flags().StringVar(&room, "room", "", "only this room's sessions")
	show := &cobra.Command{
		Use: "show RUNTIME_SESSION_ID", Short: "Show one host session", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showJSON(cf, cmd, "/v1/sessions/"+url.PathEscape(args[0]))
		},
	}
	var reason string
	stop := &cobra.Command{
		Use: "stop RUNTIME_SESSION_ID", Short: "Stop one room's runtime and hold it down (messages stay queued) until restart",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return sessionControl(cf, cmd, args[0], "stop", api.StopSessionRequest{Reason: reason})
		},
	}
	stop.Flags().StringVar(&reason, "reason", "", "why (default operator)")
	restart := &cobra.Command{
		Use: "restart RUNTIME_SESSION_ID", Short: "Restart one room's runtime; sibling rooms are untouched",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return sessionControl(cf, cmd, args[0], "restart", nil)
		},
	}
	var discard bool
	reset := &cobra.Command{
		Use:   "reset-sandbox RUNTIME_SESSION_ID",
		Short: "Destroy and recreate the sandbox of a session's Dedicated host (Shared hosts: jam host control)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, done, err := cf.operation(cmd, http.MethodPost, "/v1/sessions/"+url.PathEscape(args[0])+"/reset-sandbox",
				api.ResetSandboxRequest{DiscardChanges: discard})
			if err != nil || !done {
				return err
			}
			return render(cf, cmd, raw, func(res api.HostControlResult) error { return printControl(cmd, res) })
		},
	}
	reset.Flags().BoolVar(&discard, "discard-changes", false, "confirm a private clone's changes in the sandbox may be destroyed")
	cmd.AddCommand(list, show, stop, restart, reset)
	return cmd
}

func sessionControl(cf *clientFlags, cmd *cobra.Command, id, verb string, body any) error {
	raw, err := cf.call(cmd, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/"+verb, body)
	if err != nil {
		return err
	}
	return render(cf, cmd, raw, func(s api.SessionBody) error {
		_, err := fmt.Fprintf(cmd.OutOrStdout(), "session %s: %s (%s)\n", s.RuntimeSessionID, s.Presence, s.Phase)
		return err
	})
}
