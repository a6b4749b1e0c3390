package main

import (
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
)

func newMessageCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "message", Short: "Settle an attached agent's inbound messages (needs its --key)"}
	cf := addClientFlags(cmd)
	reply := &cobra.Command{
		Use: "reply MESSAGE_ID TEXT", Short: "Reply to a message in its room", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return sendJSON(cf, cmd, http.MethodPost, "/v1/messages/"+url.PathEscape(args[0])+"/reply", api.ReplyRequest{Text: args[1]})
		},
	}
	ack := &cobra.Command{
		Use: "ack MESSAGE_ID", Short: "Settle a message without replying", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return sendJSON(cf, cmd, http.MethodPost, "/v1/messages/"+url.PathEscape(args[0])+"/ack", nil)
		},
	}
	for _, c := range []*cobra.Command{reply, ack} {
		addKeyFlag(c, cf, "the agent's API key")
	}
	cmd.AddCommand(reply, ack)
	return cmd
}
