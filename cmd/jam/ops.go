package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
)

func newOpsCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "ops", Short: "Operator overrides on Jam's Temporal workflows (each prints the temporal CLI equivalent)",
		Long: `Find, inspect and override the Temporal workflows behind Jam's objects without editing the
database. Every command prints the equivalent Temporal CLI command line, so the same can be
done with Temporal's own tools. See docs/operations.md for what stuck looks like per workflow.`}
	cf := addClientFlags(cmd)

	var kind string
	var all bool
	find := &cobra.Command{
		Use:   "find ID|NAME",
		Short: "The workflows of an agent, room, host, workspace or template (by id, or an agent's or room's name)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"object": {args[0]}}
			if kind != "" {
				q.Set("kind", kind)
			}
			if all {
				q.Set("all", "true")
			}
			raw, err := cf.call(cmd, http.MethodGet, "/v1/ops/workflows?"+q.Encode(), nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.OpsFindBody) error {
				rows := make([][]string, len(out.Items))
				for i, w := range out.Items {
					rows[i] = []string{w.WorkflowID, w.Status, w.Stage, w.StartedAt.Local().Format(time.DateTime), w.WorkflowURL}
				}
				if err := table(cmd.OutOrStdout(), "WORKFLOW\tSTATUS\tSTAGE\tSTARTED\tWEB UI", rows); err != nil {
					return err
				}
				return equivalent(cmd.OutOrStdout(), out.Temporal)
			})
		},
	}
	find.Flags().StringVar(&kind, "kind", "", "only workflows of this type (RoomSession, RuntimeHost, WorkspaceOp, …)")
	find.Flags().BoolVar(&all, "all", false, "closed workflows too")

	describe := &cobra.Command{
		Use:   "describe WORKFLOW-ID",
		Short: "What a workflow is doing: stage, details, pending activities with attempts and last failure",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodGet, "/v1/ops/workflows/"+url.PathEscape(args[0]), nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.OpsDescribeBody) error {
				w := cmd.OutOrStdout()
				wf := out.Workflow
				fmt.Fprintf(w, "%s (%s) %s, stage %s, run %s\n", wf.WorkflowID, wf.Type, wf.Status, orDash(wf.Stage), wf.RunID)
				if wf.Summary != "" {
					fmt.Fprintf(w, "summary: %s\n", wf.Summary)
				}
				if wf.Details != "" {
					fmt.Fprintf(w, "now:     %s\n", wf.Details)
				}
				if out.WorkflowTaskPending && out.WorkflowTaskAttempts > 1 {
					fmt.Fprintf(w, "a workflow task has failed %d times: a workflow bug; `jam ops retry` once it is fixed\n", out.WorkflowTaskAttempts-1)
				}
				if len(out.PendingActivities) == 0 {
					fmt.Fprintln(w, "no pending activities")
				} else {
					rows := make([][]string, len(out.PendingActivities))
					for i, a := range out.PendingActivities {
						max := "unlimited"
						if a.MaxAttempts > 0 {
							max = strconv.Itoa(int(a.MaxAttempts))
						}
						rows[i] = []string{a.Type, a.State, fmt.Sprintf("%d of %s", a.Attempt, max), orDash(a.LastFailure)}
					}
					if err := table(w, "ACTIVITY\tSTATE\tATTEMPT\tLAST FAILURE", rows); err != nil {
						return err
					}
				}
				for _, u := range out.PendingUpdates {
					fmt.Fprintf(w, "pending update %s (%s), accepted %s\n", u.Name, u.UpdateID, u.AcceptedAt.Local().Format(time.DateTime))
				}
				if wf.WorkflowURL != "" {
					fmt.Fprintf(w, "web ui: %s\n", wf.WorkflowURL)
				}
				return equivalent(w, out.Temporal)
			})
		},
	}

	var reason string
	retry := &cobra.Command{
		Use:   "retry WORKFLOW-ID",
		Short: "Reset a workflow to its last workflow task (stuck on a bug fixed since, or on an activity whose cause is gone)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodPost, "/v1/ops/workflows/"+url.PathEscape(args[0])+"/retry", api.OpsRetryRequest{Reason: reason})
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.OpsActionBody) error { return action(cmd.OutOrStdout(), out) })
		},
	}
	retry.Flags().StringVar(&reason, "reason", "", "why, for the workflow's history")

	var force bool
	terminate := &cobra.Command{
		Use:   "terminate WORKFLOW-ID --reason TEXT",
		Short: "Terminate a workflow (RoomSession and RuntimeHost only with --force)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodPost, "/v1/ops/workflows/"+url.PathEscape(args[0])+"/terminate",
				api.OpsTerminateRequest{Reason: reason, Force: force})
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.OpsActionBody) error { return action(cmd.OutOrStdout(), out) })
		},
	}
	terminate.Flags().StringVar(&reason, "reason", "", "why, for the workflow's history (required)")
	terminate.Flags().BoolVar(&force, "force", false, "terminate a RoomSession or RuntimeHost too")

	signal := &cobra.Command{
		Use:   "signal SESSION inbound",
		Short: "Signal a session's workflow that its room may have messages",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[1] != "inbound" {
				return fmt.Errorf("unknown signal %q: the one an operator sends is inbound", args[1])
			}
			raw, err := cf.call(cmd, http.MethodPost, "/v1/ops/sessions/"+url.PathEscape(args[0])+"/inbound", nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.OpsActionBody) error { return action(cmd.OutOrStdout(), out) })
		},
	}

	reconcile := &cobra.Command{Use: "reconcile", Short: "The Reconcile schedule"}
	status := &cobra.Command{
		Use:   "status",
		Short: "The schedule's interval, next run and its newest finished run's report",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, err := cf.call(cmd, http.MethodGet, "/v1/ops/reconcile", nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.OpsReconcileBody) error {
				w := cmd.OutOrStdout()
				state := "running"
				if out.Paused {
					state = "paused"
				}
				fmt.Fprintf(w, "schedule %s: %s, every %s", out.ScheduleID, state, orDash(out.Interval))
				if out.NextRunAt != nil {
					fmt.Fprintf(w, ", next run %s", out.NextRunAt.Local().Format(time.DateTime))
				}
				fmt.Fprintln(w)
				if out.LastRun != nil && out.LastResult != nil {
					r := out.LastResult
					fmt.Fprintf(w, "last run %s (%s): %d session(s) poked, %d started, %d deferred, %d retried, stale nodes: %s\n",
						out.LastRun.WorkflowID, out.LastRun.Status, r.Poked, len(r.Started), r.Deferred, r.Retried, orDash(strings.Join(r.StaleNodes, ", ")))
				} else {
					fmt.Fprintln(w, "no finished run yet")
				}
				return equivalent(w, out.Temporal+"  (pause: temporal schedule toggle --schedule-id "+out.ScheduleID+" --pause --reason …)")
			})
		},
	}
	reconcile.AddCommand(status)
	cmd.AddCommand(find, describe, retry, terminate, signal, reconcile)
	return cmd
}

func action(w io.Writer, out api.OpsActionBody) error {
	fmt.Fprintf(w, "%s: %s\n", out.WorkflowID, out.Done)
	if out.RunID != "" {
		fmt.Fprintf(w, "run %s\n", out.RunID)
	}
	if out.Next != "" {
		fmt.Fprintf(w, "next: %s\n", out.Next)
	}
	return equivalent(w, out.Temporal)
}

// equivalent prints the Temporal CLI command that does the same.
func equivalent(w io.Writer, temporal string) error {
	_, err := fmt.Fprintf(w, "with Temporal's CLI: %s\n", temporal)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
