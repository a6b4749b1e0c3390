package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/internal/tools"
)

// newMCPCmd is the stdio bridge to a runtime's endpoint of Jam's tools. Jam names it in a
// provider's MCP configuration when the provider takes only stdio MCP servers; the runtime's
// token comes in the environment, never on the command line.
func newMCPCmd(_ *globals) *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "mcp --url URL",
		Short: "Bridge Jam's runtime tools to a stdio MCP client (run by providers, not by hand)",
		Long: `Serve Jam's runtime tools (jam_reply_to_message, jam_no_reply, jam_send_message,
jam_room_context, jam_ask_question) to an MCP client on stdin/stdout, forwarding every call
to the runtime's Streamable HTTP endpoint at --url with the runtime's token from
` + tools.BridgeTokenEnv + `. Jam configures this for providers whose MCP client takes only
stdio servers; the token is the runtime instance's own and stops working when it is torn down.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token := os.Getenv(tools.BridgeTokenEnv)
			if token == "" {
				return errors.New(tools.BridgeTokenEnv + " is not set: jam mcp is started by a provider Jam configured")
			}
			if url == "" {
				return errors.New("--url is required")
			}
			if err := tools.Bridge(cmd.Context(), url, token, os.Stdin, os.Stdout); err != nil {
				return fmt.Errorf("jam mcp: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "the runtime's MCP endpoint")
	return cmd
}
