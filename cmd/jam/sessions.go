package main

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
)

func newSessionCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "session", Short: "Runtime sessions: each room's runtime of an owned agent, its state, configuration and generations",
		Long: `A runtime session is one owned agent's runtime in one room: bound when the agent joins the
room, with a stable id across restarts (so the same provider thread resumes). Its presence is
live, degraded, dormant (no process; the next message wakes it), disconnected, failed or
unknown; an operator's stop holds it dormant until jam session restart.`}
	cf := addClientFlags(cmd)
	var agent, room string
	list := &cobra.Command{
		Use: "list", Short: "List runtime sessions", Args: cobra.NoArgs,
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
		Use: "show RUNTIME_SESSION_ID", Short: "Show one runtime session", Args: cobra.ExactArgs(1),
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
	cmd.AddCommand(sessionContinuityCmds(cf)...)
	return cmd
}

// sessionContinuityCmds are `jam session continuity` and `jam session start-fresh`.
func sessionContinuityCmds(cf *clientFlags) []*cobra.Command {
	continuity := &cobra.Command{
		Use:   "continuity RUNTIME_SESSION_ID",
		Short: "Can the session's provider thread be resumed? Its evidence, and the start-fresh command when offered",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodGet, "/v1/sessions/"+url.PathEscape(args[0])+"/continuity", nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(b api.SessionContinuityBody) error {
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "session %s: thread %s, resume policy %s\n", b.RuntimeSession, orDash(b.ProviderSessionID), b.ResumePolicy)
				if b.Failure != nil {
					fmt.Fprintf(w, "failed: %s: %s\n", b.Failure.Class, b.Failure.Reason)
				}
				fmt.Fprintf(w, "evidence checksum: %s\n", b.EvidenceChecksum)
				if b.CanStartFresh {
					_, err := fmt.Fprintf(w, "start fresh (the thread is abandoned for a new one): %s\n", b.StartFresh)
					return err
				}
				_, err := fmt.Fprintln(w, "start-fresh is not offered: the session does not fail for want of an exact resume")
				return err
			})
		},
	}
	var checksum string
	var confirm bool
	fresh := &cobra.Command{
		Use:   "start-fresh RUNTIME_SESSION_ID --checksum EVIDENCE --confirm",
		Short: "Start a session whose provider thread cannot be resumed on a new thread, bound to the evidence you inspected",
		Long: `A host-native session under an exact-resume contract (resume_policy exact, the default) whose
provider thread cannot be resumed holds failed (exact_resume_unavailable). Inspect it with
jam session continuity, then start it fresh with the evidence checksum you read: the abandoned
thread is unbound (the provider keeps it; the room is told) and the session answers its
queued messages on a new thread. A changed evidence is refused: inspect again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !confirm {
				return fmt.Errorf("--confirm is required: the session's provider thread is abandoned for a new one")
			}
			raw, done, err := cf.operation(cmd, http.MethodPost, "/v1/sessions/"+url.PathEscape(args[0])+"/start-fresh",
				api.SessionStartFreshRequest{ConfirmStartFresh: true, EvidenceChecksum: checksum})
			if err != nil || !done {
				return err
			}
			// The operation's result is the session's status as its workflow reports it.
			return render(cf, cmd, raw, func(s struct {
				Presence domain.Presence `json:"presence"`
			}) error {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "session %s started fresh: %s; its queued messages are answered on a new thread\n", args[0], s.Presence)
				return err
			})
		},
	}
	fresh.Flags().StringVar(&checksum, "checksum", "", "the evidence_checksum jam session continuity printed")
	fresh.Flags().BoolVar(&confirm, "confirm", false, "confirm the provider thread is abandoned for a new one")
	return []*cobra.Command{continuity, fresh}
}

func sessionControl(cf *clientFlags, cmd *cobra.Command, id, verb string, body any) error {
	raw, err := cf.call(cmd, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/"+verb, body)
	if err != nil {
		return err
	}
	return render(cf, cmd, raw, func(s api.SessionBody) error {
		_, err := fmt.Fprintln(cmd.OutOrStdout(), controlOutcome(verb, s))
		return err
	})
}

// controlOutcome says what a stop or restart did and the state the session's workflow
// answered with once it had.
func controlOutcome(verb string, s api.SessionBody) string {
	held := s.Runtime != nil && s.Runtime.Held
	var state string
	switch {
	case s.Failure != nil:
		state = fmt.Sprintf("failed, %s: %s", s.Failure.Class, s.Failure.Reason)
	case s.Presence == domain.PresenceFailed:
		state = "failed"
	case held:
		state = fmt.Sprintf("held %s until jam session restart %s (messages stay queued)", s.Presence, s.RuntimeSessionID)
	case verb == "restart" && s.Presence == domain.PresenceDormant:
		state = "dormant, starting again now (the old runtime was stopped)"
	case verb == "stop" && s.Presence == domain.PresenceDormant:
		state = "dormant, not held: the next message wakes it"
	default:
		state = string(s.Presence)
	}
	if s.Runtime != nil && s.Runtime.LastError != "" && s.Failure == nil {
		state += "; last error: " + s.Runtime.LastError
	}
	done := map[string]string{"stop": "stopped", "restart": "restarted"}[verb]
	return fmt.Sprintf("%s session %s: %s", done, s.RuntimeSessionID, state)
}
