package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// templateFlags build a template from flags, or read one from a JSON file.
type templateFlags struct {
	file                                 string
	alias, transport, command, placement string
	args, env, settings                  []string
	sandbox                              bool
	workspaceSource, hostPath            string
	networkProfile                       string
	authMode, idlePolicy                 string
	resumePolicy                         string
}

func (f *templateFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.file, "file", "", "the template as JSON (- for stdin); the other flags are ignored")
	fs.StringVar(&f.alias, "alias", "default", "template alias")
	fs.StringVar(&f.transport, "transport", "", "transport: "+transportNames())
	fs.StringVar(&f.command, "command", "", "absolute path of the agent executable (default: resolve the transport's)")
	fs.StringArrayVar(&f.args, "arg", nil, "an argument (repeatable)")
	fs.StringArrayVar(&f.env, "env", nil, "a host environment variable to pass through (repeatable)")
	fs.StringArrayVar(&f.settings, "setting", nil, "a transport setting KEY=VALUE, e.g. model=gpt-5 or model_provider_base_url=http://127.0.0.1:11434/v1 (repeatable)")
	fs.StringVar(&f.placement, "placement", "", "shared_agent_host or dedicated_session_host (default dedicated)")
	fs.BoolVar(&f.sandbox, "sandbox", false, "run inside a Docker Sandboxes microVM")
	fs.StringVar(&f.workspaceSource, "workspace-source", "", "managed, private_host_clone or direct_host (sandboxed)")
	fs.StringVar(&f.hostPath, "host-path", "", "checkout of a private_host_clone or direct_host workspace")
	fs.StringVar(&f.networkProfile, "network-profile", "", "developer or production")
	fs.StringVar(&f.authMode, "auth-mode", "", "provider_login, api_key or agent_managed (default: the transport's first)")
	fs.StringVar(&f.idlePolicy, "idle-policy", "", "allow or keep_alive (default: the transport's)")
	fs.StringVar(&f.resumePolicy, "resume-policy", "", "exact (default: a thread that cannot be resumed fails closed; jam session start-fresh) or fresh (continue on a new thread, telling the room)")
}

func transportNames() string {
	var names []string
	for _, s := range domain.TransportCatalog() {
		if s.Owned {
			names = append(names, string(s.Transport))
		}
	}
	return fmt.Sprint(names)
}

// body returns the request body: the file as it is, or a template built from the flags.
func (f *templateFlags) body(cmd *cobra.Command) (json.RawMessage, error) {
	if f.file != "" {
		var r io.Reader = cmd.InOrStdin()
		if f.file != "-" {
			fh, err := os.Open(f.file)
			if err != nil {
				return nil, err
			}
			defer fh.Close()
			r = fh
		}
		raw, err := io.ReadAll(io.LimitReader(r, 1<<20))
		if err != nil {
			return nil, err
		}
		if !json.Valid(raw) {
			return nil, fmt.Errorf("%s is not JSON", f.file)
		}
		return raw, nil
	}
	if f.transport == "" {
		return nil, fmt.Errorf("give --transport (or --file)")
	}
	var settings map[string]string
	for _, kv := range f.settings {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--setting %q: want KEY=VALUE", kv)
		}
		if settings == nil {
			settings = map[string]string{}
		}
		settings[k] = v
	}
	c := domain.TemplateConfig{
		Alias: f.alias, Transport: domain.Transport(f.transport), Command: f.command, Args: f.args, EnvAllowlist: f.env, Settings: settings,
		NetworkProfile: domain.NetworkProfile(f.networkProfile), AuthMode: domain.AuthMode(f.authMode), IdlePolicy: domain.IdlePolicy(f.idlePolicy),
		ResumePolicy: domain.ResumePolicy(f.resumePolicy),
		Sandbox:      domain.SandboxConfig{Enabled: f.sandbox, WorkspaceSource: domain.WorkspaceSource(f.workspaceSource), HostPath: f.hostPath},
	}
	if f.placement != "" {
		p := domain.Placement(f.placement)
		c.Placement = &p
	}
	return json.Marshal(c)
}

func newTemplateCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "template", Short: "Runtime templates of owned agents: how their runtimes launch"}
	cf := addClientFlags(cmd)

	var cflags templateFlags
	create := &cobra.Command{
		Use:   "create AGENT_ID",
		Short: "Create a template, validated against the transport catalog",
		Example: `  jam template create $AGENT --transport acp --command /usr/local/bin/jam-testagent
  jam template create $AGENT --transport codex-app-server --sandbox --placement shared_agent_host
  jam template create $AGENT --transport claude-code-cli --auth-mode api_key --env ANTHROPIC_API_KEY --idle-policy allow
  jam template create $AGENT --file template.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := cflags.body(cmd)
			if err != nil {
				return err
			}
			raw, err := cf.call(cmd, http.MethodPost, "/v1/agents/"+url.PathEscape(args[0])+"/templates", body)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(t api.TemplateBody) error {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "created template %s (%s, %s, %s) at generation %d\n",
					t.ID, t.Alias, t.Transport, domain.ResolvePlacement(t.Placement), t.DesiredGeneration)
				return err
			})
		},
	}
	cflags.register(create)

	list := listCmd(cf, "list AGENT_ID", "List an agent's templates (a new room runs the first unless jam room add --template names another)", cobra.ExactArgs(1),
		func(a []string) string { return "/v1/agents/" + url.PathEscape(a[0]) + "/templates" },
		"ID\tALIAS\tTRANSPORT\tPLACEMENT\tSANDBOX\tDESIRED",
		func(out api.TemplateList) [][]string {
			rows := make([][]string, len(out.Items))
			for i, t := range out.Items {
				rows[i] = []string{t.ID.String(), t.Alias, string(t.Transport), string(domain.ResolvePlacement(t.Placement)),
					fmt.Sprint(t.Sandbox.Enabled), fmt.Sprint(t.DesiredGeneration)}
			}
			return rows
		})
	show := &cobra.Command{
		Use: "show ID", Short: "Show one template", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showJSON(cf, cmd, "/v1/templates/"+url.PathEscape(args[0]))
		},
	}
	var sflags templateFlags
	var applyMode string
	save := &cobra.Command{
		Use: "save ID", Short: "Save an edited template at the next desired generation", Args: cobra.ExactArgs(1),
		Long: `Save an edited template at the next desired generation.

With --apply-mode new_sessions_only (the default) rooms keep their configuration and rooms
joined later use the save. With apply_and_restart every room made from the template takes it
(a dormant room at once, a live one at its turn boundary): the command waits for that, with
a progress line on stderr, prints one line per room and runtime host, and fails when a room
did not take it. --no-wait returns once the apply started (follow it with jam operation
wait ID). -q prints only the template id and --json the saved template; both still wait.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := sflags.body(cmd)
			if err != nil {
				return err
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(body, &fields); err != nil {
				return fmt.Errorf("the template must be a JSON object: %w", err)
			}
			if applyMode != "" {
				fields["apply_mode"], _ = json.Marshal(applyMode)
			}
			return saveTemplate(cf, cmd, args[0], fields)
		},
	}
	sflags.register(save)
	save.Flags().StringVar(&applyMode, "apply-mode", "", "new_sessions_only (default) or apply_and_restart (waits for every room to take the save, unless --no-wait)")
	cmd.AddCommand(create, list, show, save)
	return cmd
}

// saveTemplate PUTs a template and, when the save applies to existing rooms (202 with an
// operation), waits for the apply unless --no-wait. Under --json and -q it prints the saved
// template (or its id) at once; the exit status still says whether every room took it.
func saveTemplate(cf *clientFlags, cmd *cobra.Command, id string, fields map[string]json.RawMessage) error {
	c, err := cf.client()
	if err != nil {
		return err
	}
	raw, err := c.DoRaw(cmd.Context(), http.MethodPut, "/v1/templates/"+url.PathEscape(id), fields)
	if err != nil {
		return err
	}
	var saved api.TemplateSaveBody
	if err := json.Unmarshal(raw, &saved); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	w := cmd.OutOrStdout()
	human := !cf.json && !cf.quiet
	if err := render(cf, cmd, raw, func(t api.TemplateSaveBody) error {
		if t.Operation == nil {
			_, err := fmt.Fprintf(w, "saved template %s at generation %d: new rooms use it; rooms made from it keep their configuration (save with --apply-mode apply_and_restart to change them)\n",
				t.ID, t.DesiredGeneration)
			return err
		}
		_, err := fmt.Fprintf(w, "saved template %s at generation %d; applying it to its rooms (operation %s)\n", t.ID, t.DesiredGeneration, t.Operation.ID)
		return err
	}); err != nil || saved.Operation == nil {
		return err
	}
	started := api.OperationResource{ID: saved.Operation.ID, Kind: domain.OpKindTemplateApply, Status: domain.OperationRunning,
		Target: api.OperationTarget{Kind: domain.TargetTemplate, ID: saved.ID.String()}, WorkflowID: saved.Operation.WorkflowID,
		WorkflowURL: saved.Operation.WorkflowURL}
	if cf.noWait {
		if human {
			fmt.Fprintf(w, "follow it: jam operation wait %s\n", started.ID)
		}
		return nil
	}
	op, err := c.WaitOperation(cmd.Context(), started, operationProgress(cmd))
	if err != nil {
		return err
	}
	if human && len(op.Result) > 0 {
		var res contract.TemplateApplyResult
		if err := json.Unmarshal(op.Result, &res); err != nil {
			return fmt.Errorf("decode the apply's result: %w", err)
		}
		printApply(w, res, saved.Operation.Generation)
	}
	if op.Status == domain.OperationFailed {
		return client.OperationError(op)
	}
	return nil
}

// printApply prints one line per room and runtime host of a template apply.
func printApply(w io.Writer, res contract.TemplateApplyResult, generation int64) {
	if res.Superseded {
		fmt.Fprintf(w, "generation %d was superseded by a newer save before it applied: the newer one applies instead\n", generation)
		return
	}
	for _, s := range res.Sessions {
		if s.Error != "" {
			fmt.Fprintf(w, "runtime session %s: did not take generation %d: %s\n", s.ID, generation, s.Error)
			continue
		}
		fmt.Fprintf(w, "runtime session %s: took generation %d\n", s.ID, generation)
	}
	for _, h := range res.Hosts {
		switch {
		case h.Error != "":
			fmt.Fprintf(w, "runtime host %s: not recreated for generation %d, its rooms keep their configuration: %s\n", h.ID, generation, h.Error)
		case h.Replaced:
			fmt.Fprintf(w, "runtime host %s: recreated for generation %d\n", h.ID, generation)
		default:
			fmt.Fprintf(w, "runtime host %s: not recreated for generation %d, its rooms keep their configuration\n", h.ID, generation)
		}
	}
	if len(res.Sessions) == 0 && len(res.Hosts) == 0 {
		fmt.Fprintf(w, "no room is made from this template: generation %d is what new rooms use\n", generation)
	}
}
