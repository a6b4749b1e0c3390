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
			raw, done, err := cf.operation(cmd, http.MethodPost, "/v1/hosts/"+url.PathEscape(args[0])+"/control",
				api.HostControlRequest{Action: domain.HostAction(args[1]), DiscardChanges: discard})
			if err != nil || !done {
				return err
			}
			return render(cf, cmd, raw, func(res api.HostControlResult) error { return printControl(cmd, res) })
		},
	}
	control.Flags().BoolVar(&discard, "discard-changes", false, "confirm a reset may destroy a private clone's changes that live only in the sandbox")
	var confirmDiscard bool
	discardUnsaved := &cobra.Command{
		Use:   "discard-unsaved HOST_ID --confirm",
		Short: "Lift the fence of a host whose last teardown checkpoint failed, without a checkpoint",
		Long: `A host whose teardown checkpoint failed is fenced (jam host show: lease.unsaved; its
workflow's stage: fenced): no member starts and no restart runs over provider state no
checkpoint holds. The checkpoint is retried every minute; jam host checkpoint HOST tries now
and lifts the fence when it succeeds. discard-unsaved lifts it without one: the host's next
member resumes from the provider state on the node as it is.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !confirmDiscard {
				return fmt.Errorf("--confirm is required: the provider state on the node is held by no checkpoint")
			}
			raw, done, err := cf.operation(cmd, http.MethodPost, "/v1/hosts/"+url.PathEscape(args[0])+"/discard-unsaved",
				api.DiscardUnsavedRequest{ConfirmDiscard: true})
			if err != nil || !done {
				return err
			}
			return render(cf, cmd, raw, func(api.HostLeaseBody) error {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "host %s: fence lifted; its next member resumes from the provider state on its node\n", args[0])
				return err
			})
		},
	}
	discardUnsaved.Flags().BoolVar(&confirmDiscard, "confirm", false, "confirm the provider state on the node is held by no checkpoint")
	cmd.AddCommand(list, show, control, discardUnsaved)
	cmd.AddCommand(continuityCommands(cf)...)
	cmd.AddCommand(hostCleanupCmd(cf))
	cmd.AddCommand(hostNetworkCmd(cf))
	return cmd
}

// hostNetworkCmd shows the host sandbox's network journal and readiness (read-only).
func hostNetworkCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "network HOST_ID",
		Short: "Show the network rules Jam owns, or found covered, in the host's sandbox, and whether each target is reachable (read-only)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodGet, "/v1/hosts/"+url.PathEscape(args[0])+"/network", nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(b api.HostNetworkBody) error {
				state := map[string]api.NetworkRuleBody{}
				for _, e := range b.Entries {
					state[e.Target] = e
				}
				rows := make([][]string, 0, len(b.Readiness))
				for _, r := range b.Readiness {
					e := state[r.Target]
					rows = append(rows, []string{r.Target, string(r.Result), orDash(string(e.State)), orDash(e.RuleID)})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "sandbox %s\n", b.Sandbox)
				return table(cmd.OutOrStdout(), "TARGET\tREACHABLE\tJOURNAL\tRULE", rows)
			})
		},
	}
}

// continuityCommands are the checkpoint and continuity verbs of `jam host`.
func continuityCommands(cf *clientFlags) []*cobra.Command {
	checkpoints := &cobra.Command{
		Use: "checkpoints HOST_ID", Short: "List the host's provider checkpoints, newest first", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodGet, "/v1/hosts/"+url.PathEscape(args[0])+"/checkpoints", nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.CheckpointList) error {
				rows := make([][]string, len(out.Items))
				for i, k := range out.Items {
					payload := fmt.Sprintf("%d bytes", k.PayloadBytes)
					if k.PayloadDeletedAt != nil {
						payload = "deleted"
					}
					candidate := "-"
					if k.AutomaticCleanupCandidate {
						candidate = "yes"
					}
					rows[i] = []string{k.ID.String(), string(k.Reason), payload, k.CreatedAt.Format("2006-01-02 15:04:05"), candidate}
				}
				return table(cmd.OutOrStdout(), "CHECKPOINT\tREASON\tPAYLOAD\tCREATED\tCLEANUP CANDIDATE", rows)
			})
		},
	}
	checkpoint := &cobra.Command{
		Use: "checkpoint HOST_ID", Short: "Capture a checkpoint now (running turns finish first, new ones wait)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, done, err := cf.operation(cmd, http.MethodPost, "/v1/hosts/"+url.PathEscape(args[0])+"/checkpoints", nil)
			if err != nil || !done {
				return err
			}
			return render(cf, cmd, raw, func(k api.CheckpointBody) error {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "checkpoint %s (%d bytes)\n", k.ID, k.PayloadBytes)
				return err
			})
		},
	}
	continuity := &cobra.Command{
		Use: "continuity HOST_ID", Short: "Can every bound provider session resume exactly? (read-only)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodGet, "/v1/hosts/"+url.PathEscape(args[0])+"/continuity", nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(b api.ContinuityBody) error {
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "%s", b.Status)
				if b.Detail != "" {
					fmt.Fprintf(w, ": %s", b.Detail)
				}
				fmt.Fprintf(w, "\nevidence %s\n", b.EvidenceChecksum)
				if b.CanStartFresh {
					fmt.Fprintf(w, "start fresh: jam host start-fresh %s --confirm --evidence %s\n", b.Host, b.EvidenceChecksum)
				}
				return nil
			})
		},
	}
	var confirm bool
	var evidence string
	startFresh := &cobra.Command{
		Use:   "start-fresh HOST_ID --confirm --evidence CHECKSUM",
		Short: "Give every room of the host a new session and provider thread (the old ones are archived, not deleted)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, done, err := cf.operation(cmd, http.MethodPost, "/v1/hosts/"+url.PathEscape(args[0])+"/continuity/start-fresh",
				api.StartFreshRequest{ConfirmStartFresh: confirm, EvidenceChecksum: evidence})
			if err != nil || !done {
				return err
			}
			return render(cf, cmd, raw, func(r domain.ContinuityReset) error {
				for _, m := range r.Mapping {
					fmt.Fprintf(cmd.OutOrStdout(), "room %s: session %s -> %s\n", m.RoomID, m.SourceSession, m.ReplacementSession)
				}
				return nil
			})
		},
	}
	startFresh.Flags().BoolVar(&confirm, "confirm", false, "confirm that the host's provider threads are abandoned for new ones")
	startFresh.Flags().StringVar(&evidence, "evidence", "", "the evidence checksum `jam host continuity` printed")
	var permanent bool
	deletePayload := &cobra.Command{
		Use:   "delete-checkpoint HOST_ID CHECKPOINT_ID --confirm-permanent",
		Short: "Delete a checkpoint's payload if retention allows (the record stays)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, done, err := cf.operation(cmd, http.MethodPost, "/v1/hosts/"+url.PathEscape(args[0])+"/checkpoints/"+url.PathEscape(args[1])+"/delete-payload",
				api.DeletePayloadRequest{ConfirmPermanent: permanent})
			if err != nil || !done {
				return err
			}
			return render(cf, cmd, raw, func(d domain.CheckpointDeletion) error {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "checkpoint %s: %s\n", d.CheckpointID, d.Stage)
				return err
			})
		},
	}
	deletePayload.Flags().BoolVar(&permanent, "confirm-permanent", false, "confirm that the payload cannot be restored afterwards")
	return []*cobra.Command{checkpoints, checkpoint, continuity, startFresh, deletePayload}
}

func printControl(cmd *cobra.Command, res api.HostControlResult) error {
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
