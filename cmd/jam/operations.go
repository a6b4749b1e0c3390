package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
)

// operationCmd is `jam operation`: follow the long operations (host control, checkpoints,
// start-fresh, cleanup) that routes answer with 202.
func operationCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "operation", Short: "Show or wait for a long operation (what a 202 answer started)"}
	cf := addClientFlags(cmd)
	show := &cobra.Command{
		Use: "show OPERATION_ID", Short: "Show an operation: kind, target, status, stage, result or failure", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodGet, "/v1/operations/"+url.PathEscape(args[0]), nil)
			if err != nil {
				return err
			}
			return showOperation(cf, cmd, raw)
		},
	}
	wait := &cobra.Command{
		Use: "wait OPERATION_ID", Short: "Wait for an operation to finish (a progress line on stderr); fails when it failed", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var op api.OperationResource
			if err := c.Do(cmd.Context(), http.MethodGet, "/v1/operations/"+url.PathEscape(args[0]), nil, &op); err != nil {
				return err
			}
			if op, err = c.WaitOperation(cmd.Context(), op, operationProgress(cmd)); err != nil {
				return err
			}
			raw, err := json.Marshal(op)
			if err != nil {
				return err
			}
			if err := showOperation(cf, cmd, raw); err != nil {
				return err
			}
			if op.Status == domain.OperationFailed {
				return client.OperationError(op)
			}
			return nil
		},
	}
	cmd.AddCommand(show, wait)
	return cmd
}

// showOperation prints an operation and, once it succeeded, its result as JSON.
func showOperation(cf *clientFlags, cmd *cobra.Command, raw []byte) error {
	var op api.OperationResource
	if err := json.Unmarshal(raw, &op); err != nil {
		return fmt.Errorf("decode operation: %w", err)
	}
	if err := printOperation(cf, cmd, raw, op); err != nil || cf.json || cf.quiet {
		return err
	}
	if len(op.Result) > 0 {
		fmt.Fprintln(cmd.OutOrStdout(), "result:")
		return printJSON(cmd.OutOrStdout(), op.Result)
	}
	return nil
}
