package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
)

func newAgentCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "agent", Short: "Agents: owned (Jam runs them) and attached (you run them)"}
	cf := addClientFlags(cmd)
	path := func(id string, rest ...string) string {
		p := "/v1/agents/" + url.PathEscape(id)
		for _, r := range rest {
			p += "/" + r
		}
		return p
	}

	var kind, briefing string
	var tf templateFlags
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an agent (never changes an existing one; asked again for the same owned agent, prints it)",
		Long: `Create an agent. An owned agent gets its first runtime template, which its rooms run
unless jam room add names another: the template flags (--transport, --setting, --env, …) as
for jam template create, or by default the test agent (transport acp, alias default).`,
		Example: `  jam agent create demo
  jam agent create coder --transport codex-app-server --setting model=stub-model --env STUB_KEY
  jam agent create helper --kind attached`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.CreateAgentRequest{Name: args[0], Kind: domain.AgentKind(kind), Briefing: briefing}
			if tf.transport == "" && tf.file == "" {
				// A template flag alone would be dropped silently: say what it needs.
				var given string
				cmd.Flags().VisitAll(func(f *pflag.Flag) {
					if given == "" && f.Changed && !slices.Contains([]string{"kind", "briefing"}, f.Name) && cmd.LocalFlags().Lookup(f.Name) != nil {
						given = f.Name
					}
				})
				if given != "" {
					return fmt.Errorf("--%s describes the agent's first template: give --transport too (or --file)", given)
				}
			}
			if tf.transport != "" || tf.file != "" {
				raw, err := tf.body(cmd)
				if err != nil {
					return err
				}
				req.Template = &domain.TemplateConfig{}
				if err := json.Unmarshal(raw, req.Template); err != nil {
					return fmt.Errorf("--file: %w", err)
				}
			}
			raw, err := cf.call(cmd, http.MethodPost, "/v1/agents", req)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(a api.AgentBody) error {
				fmt.Fprintf(cmd.OutOrStdout(), "%s agent %s (%s)\n", a.Kind, a.Name, a.ID)
				if a.APIKey != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "API key (shown once; give it to the agent as JAM_AGENT_KEY):\n%s\n", a.APIKey)
				}
				return nil
			})
		},
	}
	create.Flags().StringVar(&kind, "kind", string(domain.AgentOwned), "owned or attached")
	create.Flags().StringVar(&briefing, "briefing", "", "operator briefing")
	tf.register(create)

	list := listCmd(cf, "list", "List agents", cobra.NoArgs, fixed("/v1/agents"), "ID\tNAME\tKIND\tRUN INTENT",
		func(out api.AgentList) [][]string {
			rows := make([][]string, len(out.Items))
			for i, a := range out.Items {
				rows[i] = []string{a.ID.String(), a.Name, string(a.Kind), string(a.RunIntent)}
			}
			return rows
		})
	show := &cobra.Command{
		Use: "show ID", Short: "Show one agent", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return showJSON(cf, cmd, path(args[0])) },
	}
	var (
		newBriefing          string
		questionTimeout      int
		clearQuestionTimeout bool
	)
	edit := &cobra.Command{
		Use:   "edit ID [--briefing TEXT] [--question-timeout-secs N | --clear-question-timeout]",
		Short: "Edit an agent's operator briefing or how long its questions to humans wait",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req api.PatchAgentRequest
			if cmd.Flags().Changed("briefing") {
				req.Briefing = &newBriefing
			}
			switch {
			case cmd.Flags().Changed("question-timeout-secs") && clearQuestionTimeout:
				return fmt.Errorf("--question-timeout-secs and --clear-question-timeout exclude each other")
			case cmd.Flags().Changed("question-timeout-secs"):
				req.QuestionTimeoutSecs = api.NullableInt{Set: true, Value: &questionTimeout}
			case clearQuestionTimeout:
				req.QuestionTimeoutSecs = api.NullableInt{Set: true}
			}
			if req.Briefing == nil && !req.QuestionTimeoutSecs.Set {
				return fmt.Errorf("nothing to edit: give --briefing, --question-timeout-secs or --clear-question-timeout")
			}
			return sendJSON(cf, cmd, http.MethodPatch, path(args[0]), req)
		},
	}
	edit.Flags().StringVar(&newBriefing, "briefing", "", "the new briefing")
	edit.Flags().IntVar(&questionTimeout, "question-timeout-secs", 0,
		"seconds the agent's questions to humans wait for an answer (0: indefinitely)")
	edit.Flags().BoolVar(&clearQuestionTimeout, "clear-question-timeout", false,
		"let JAM_QUESTION_TIMEOUT_SECS, else the runtime.question.timeout_secs setting, decide again")
	del := &cobra.Command{
		Use: "delete ID", Short: "Stop an agent's runtimes and delete it", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := cf.call(cmd, http.MethodDelete, path(args[0]), nil); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "deleted", args[0])
			return nil
		},
	}
	intent := func(verb, short string) *cobra.Command {
		return &cobra.Command{
			Use: verb + " ID", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				raw, err := cf.call(cmd, http.MethodPost, path(args[0], verb), nil)
				if err != nil {
					return err
				}
				return render(cf, cmd, raw, func(a api.AgentBody) error {
					_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: run intent %s\n", a.Name, a.RunIntent)
					return err
				})
			},
		}
	}

	var lease string
	var wait int
	receive := &cobra.Command{
		Use:   "receive ID",
		Short: "Wait for an attached agent's next message (long poll, needs its --key)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.ReceiveRequest{WaitSeconds: &wait}
			if lease != "" {
				req.LeaseID = &lease
			}
			raw, err := cf.call(cmd, http.MethodPost, path(args[0], "receive"), req)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.ReceiveBody) error {
				w := cmd.OutOrStdout()
				if out.Message == nil {
					_, err := fmt.Fprintf(w, "no message (lease %s)\n", out.LeaseID)
					return err
				}
				if out.AckRequiredMessageID != nil {
					fmt.Fprintf(w, "still unsettled, reply or ack it first:\n")
				}
				_, err := fmt.Fprintf(w, "message %s from %s (lease %s):\n%s\n", out.Message.ID, newAuthorNamer(cf, cmd).name(*out.Message), out.LeaseID, out.Message.Text)
				return err
			})
		},
	}
	receive.Flags().StringVar(&lease, "lease", "", "lease to re-arm (default: a new one)")
	receive.Flags().IntVar(&wait, "wait", 30, "seconds to wait (at most 55)")
	addKeyFlag(receive, cf, "the agent's API key")

	cmd.AddCommand(create, list, show, edit, del,
		intent("stop", "Stop the agent and keep it stopped: an owned agent's runtimes stop, an attached agent's key is refused; messages stay queued"),
		intent("start", "Let the agent run again: owned rooms with queued messages wake, an attached agent's key works again"),
		intent("restart", "Restart every room's runtime (owned agents)"),
		receive)
	return cmd
}

// showJSON prints one resource.
func showJSON(cf *clientFlags, cmd *cobra.Command, path string) error {
	raw, err := cf.call(cmd, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	return printJSON(cmd.OutOrStdout(), raw)
}

// sendJSON sends a body and prints the resource the API answers with.
func sendJSON(cf *clientFlags, cmd *cobra.Command, method, path string, body any) error {
	raw, err := cf.call(cmd, method, path, body)
	if err != nil {
		return err
	}
	return printJSON(cmd.OutOrStdout(), raw)
}
