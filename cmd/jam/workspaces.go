package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
)

func newWorkspaceCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "workspace", Short: "Managed workspaces: repositories, archive, export, restore and delete exports"}
	cf := addClientFlags(cmd)
	var host string
	list := &cobra.Command{
		Use: "list", Short: "List managed workspaces", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := "/v1/workspaces"
			if host != "" {
				path += "?host=" + url.QueryEscape(host)
			}
			raw, err := cf.call(cmd, http.MethodGet, path, nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.WorkspaceList) error {
				rows := make([][]string, len(out.Items))
				for i, w := range out.Items {
					rows[i] = []string{w.ID.String(), w.RuntimeHostID.String(), string(w.Source), string(w.State)}
				}
				return table(cmd.OutOrStdout(), "WORKSPACE\tHOST\tSOURCE\tSTATE", rows)
			})
		},
	}
	list.Flags().StringVar(&host, "host", "", "only this runtime host's workspaces")
	show := &cobra.Command{
		Use: "show WORKSPACE_ID", Short: "Show a workspace, its exports, recent operations and bytes", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showJSON(cf, cmd, "/v1/workspaces/"+url.PathEscape(args[0]))
		},
	}
	removal := &cobra.Command{
		Use: "removal WORKSPACE_ID", Short: "What would removing the workspace lose? (read-only repository inventory)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showJSON(cf, cmd, "/v1/workspaces/"+url.PathEscape(args[0])+"/removal")
		},
	}
	var retention string
	var force bool
	archive := &cobra.Command{
		Use:   "archive WORKSPACE_ID",
		Short: "Stop the session, export the workspace, then remove its live bytes",
		Long: `Archive one session's workspace: the session is stopped (with a checkpoint) and held, a
fresh inspection refuses when a repository has uncommitted or unpushed work (unless
--force-discard), an export is made and verified, older exports are pruned (keep_latest), and
only then are the live bytes removed. Sibling sessions on a Shared host are untouched.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWorkspaceOp(cf, cmd, args[0], "archive", api.WorkspaceOpRequest{
				Retention: domain.ArchiveRetention(retention), ForceDiscard: force})
		},
	}
	archive.Flags().StringVar(&retention, "retention", string(domain.RetainLatest), "older exports to keep: "+strings.Join(domain.ArchiveRetentions.Strings(), "|"))
	archive.Flags().BoolVar(&force, "force-discard", false, "archive even with uncommitted or unpushed work (the export still holds the bytes)")
	export := &cobra.Command{
		Use: "export WORKSPACE_ID", Short: "Make an immutable export of the workspace and its latest checkpoint", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWorkspaceOp(cf, cmd, args[0], "export", api.WorkspaceOpRequest{})
		},
	}
	var exportID string
	restore := &cobra.Command{
		Use:   "restore WORKSPACE_ID [--export EXPORT_ID]",
		Short: "Restore an archived workspace from its latest (or a named) export",
		Long: `Restore puts the export's checkpoint back first, then the workspace, through a private
staging directory; it never writes over an existing workspace. The session stays stopped:
run ` + "`jam session restart`" + ` to bring it back.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.WorkspaceOpRequest{}
			if exportID != "" {
				id, err := uuid.Parse(exportID)
				if err != nil {
					return fmt.Errorf("--export: %w", err)
				}
				req.ExportID = &id
			}
			return runWorkspaceOp(cf, cmd, args[0], "restore", req)
		},
	}
	restore.Flags().StringVar(&exportID, "export", "", "the export to restore (default: the latest)")
	var permanent bool
	deleteExport := &cobra.Command{
		Use:   "delete-export WORKSPACE_ID EXPORT_ID --confirm-permanent",
		Short: "Delete one export of an archived workspace for good",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWorkspaceOp(cf, cmd, args[0], "exports/"+url.PathEscape(args[1])+"/delete",
				api.WorkspaceOpRequest{ConfirmPermanent: permanent})
		},
	}
	deleteExport.Flags().BoolVar(&permanent, "confirm-permanent", false, "confirm that the export cannot be restored afterwards")
	reconcile := &cobra.Command{
		Use: "reconcile WORKSPACE_ID", Short: "Finish an interrupted operation from its recorded intent", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWorkspaceOp(cf, cmd, args[0], "reconcile", api.WorkspaceOpRequest{})
		},
	}
	operation := &cobra.Command{
		Use: "operation WORKSPACE_ID OPERATION_ID", Short: "Show one operation and its journal", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showJSON(cf, cmd, "/v1/workspaces/"+url.PathEscape(args[0])+"/operations/"+url.PathEscape(args[1]))
		},
	}
	cmd.AddCommand(list, show, removal, archive, export, restore, deleteExport, reconcile, operation, workspaceRepoCmd(cf))
	return cmd
}

// runWorkspaceOp starts a workspace operation and, unless --no-wait, follows it to its end.
func runWorkspaceOp(cf *clientFlags, cmd *cobra.Command, workspace, verb string, req api.WorkspaceOpRequest) error {
	raw, done, err := cf.operation(cmd, http.MethodPost, "/v1/workspaces/"+url.PathEscape(workspace)+"/"+verb, req)
	if err != nil || !done {
		return err
	}
	return render(cf, cmd, raw, func(b api.WorkspaceOpBody) error { return printWorkspaceOp(cmd, b) })
}

func printWorkspaceOp(cmd *cobra.Command, r api.WorkspaceOpBody) error {
	w := cmd.OutOrStdout()
	if r.Operation == nil {
		_, err := fmt.Fprintf(w, "running (workflow %s)\n", r.WorkflowID)
		return err
	}
	op := r.Operation
	fmt.Fprintf(w, "%s %s: %s", op.Kind, op.ID, op.State)
	if op.ResultClass != "" {
		fmt.Fprintf(w, " (%s)", op.ResultClass)
	}
	if r.Resumed {
		fmt.Fprint(w, ", resumed")
	}
	fmt.Fprintln(w)
	if r.Export != nil {
		fmt.Fprintf(w, "export %s: %d bytes, manifest %s\n", r.Export.ID, r.Export.Bytes, r.Export.ManifestChecksum)
	}
	for _, b := range r.Blockers {
		fmt.Fprintf(w, "  blocked: %s\n", b)
	}
	return nil
}

// hostCleanupCmd is `jam host cleanup`: the preflight, or with --confirm-permanent the cleanup.
func hostCleanupCmd(cf *clientFlags) *cobra.Command {
	var permanent bool
	cmd := &cobra.Command{
		Use:   "cleanup HOST_ID [--confirm-permanent]",
		Short: "Inspect (or, confirmed, run) the removal of a whole host: sandbox, then files; exports stay",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/v1/hosts/" + url.PathEscape(args[0]) + "/cleanup"
			if !permanent {
				raw, err := cf.call(cmd, http.MethodGet, path, nil)
				if err != nil {
					return err
				}
				return render(cf, cmd, raw, func(b api.CleanupInspectionBody) error {
					w := cmd.OutOrStdout()
					fmt.Fprintf(w, "host root %d bytes, exports kept %d bytes\n", b.PlannedRuntimeHostBytes, b.RetainedExportBytes)
					for _, x := range b.Blockers {
						fmt.Fprintf(w, "  blocked: %s\n", x)
					}
					if b.CanCleanup {
						fmt.Fprintf(w, "clean up: jam host cleanup %s --confirm-permanent\n", args[0])
					}
					return nil
				})
			}
			raw, done, err := cf.operation(cmd, http.MethodPost, path, api.CleanupRequest{ConfirmPermanent: true})
			if err != nil || !done {
				return err
			}
			return render(cf, cmd, raw, func(r api.HostCleanupResultBody) error {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "cleanup %s: %s (%d bytes removed, %d export bytes kept)\n",
					r.Cleanup.ID, r.Cleanup.Stage, r.Cleanup.RemovedRuntimeHostBytes, r.Cleanup.RetainedExportBytes)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&permanent, "confirm-permanent", false, "run the cleanup: the host's sandbox and files are removed for good")
	return cmd
}
