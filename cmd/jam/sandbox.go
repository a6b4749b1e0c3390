package main

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
)

func newSandboxCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Short: "Docker Sandboxes (sbx) on the nodes"}
	cf := addClientFlags(cmd)
	var node string
	support := &cobra.Command{
		Use: "support", Short: "Ask a node whether it can run sandboxed runtimes, and why not", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := "/v1/sandbox/support"
			if node != "" {
				path += "?node=" + url.QueryEscape(node)
			}
			raw, err := cf.call(cmd, http.MethodGet, path, nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(b api.SandboxSupportBody) error {
				fmt.Fprintf(cmd.OutOrStdout(), "node %s: %s", b.Node, b.Support.Status)
				if b.Support.Version != "" {
					fmt.Fprintf(cmd.OutOrStdout(), " (sbx %s at %s)", b.Support.Version, b.Support.Path)
				}
				if b.Support.Detail != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "\n  %s", b.Support.Detail)
				}
				_, err := fmt.Fprintln(cmd.OutOrStdout())
				return err
			})
		},
	}
	support.Flags().StringVar(&node, "node", "", "the node to ask (default: the only node)")
	inventory := &cobra.Command{
		Use: "inventory", Short: "Classify a node's sandboxes and owner markers (read-only; foreign sandboxes are only counted)",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := "/v1/sandbox/inventory"
			if node != "" {
				path += "?node=" + url.QueryEscape(node)
			}
			raw, err := cf.call(cmd, http.MethodGet, path, nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(b api.SandboxInventoryBody) error {
				rows := make([][]string, len(b.Inventory.Entries))
				for i, e := range b.Inventory.Entries {
					status := string(e.Status)
					if status == "" {
						status = "absent"
					}
					rows[i] = []string{e.Name, string(e.Disposition), status, e.Host, e.Detail}
				}
				if err := table(cmd.OutOrStdout(), "SANDBOX\tDISPOSITION\tSTATUS\tHOST\tDETAIL", rows); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "node %s: %d foreign sandbox(es) not listed\n", b.Node, b.Inventory.Foreign)
				return err
			})
		},
	}
	inventory.Flags().StringVar(&node, "node", "", "the node to ask (default: the only node)")
	cmd.AddCommand(support, inventory)
	return cmd
}
