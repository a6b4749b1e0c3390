package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
)

func newMessageCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "message", Short: "Settle an attached agent's inbound messages (needs its --key)"}
	cf := addClientFlags(cmd)
	reply := &cobra.Command{
		Use: "reply MESSAGE_ID TEXT", Short: "Reply to a message in its room (-q prints the reply's id)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return settle(cf, cmd, args[0], "reply", api.ReplyRequest{Text: args[1]})
		},
	}
	ack := &cobra.Command{
		Use: "ack MESSAGE_ID", Short: "Settle a message without replying (-q prints the message's id)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return settle(cf, cmd, args[0], "ack", nil)
		},
	}
	for _, c := range []*cobra.Command{reply, ack} {
		addKeyFlag(c, cf, "the agent's API key")
	}
	cmd.AddCommand(reply, ack)
	return cmd
}

// settle replies to or acknowledges a message and prints one line: under -q the id of what
// it created (the reply) or settled (the message), under --json the settlement.
func settle(cf *clientFlags, cmd *cobra.Command, id, verb string, body any) error {
	raw, err := cf.call(cmd, http.MethodPost, "/v1/messages/"+url.PathEscape(id)+"/"+verb, body)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(cmd.OutOrStdout(), raw)
	}
	var s api.SettleBody
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	w := cmd.OutOrStdout()
	switch {
	case s.Reply != nil && cf.quiet:
		_, err = fmt.Fprintln(w, s.Reply.ID)
	case cf.quiet:
		_, err = fmt.Fprintln(w, s.MessageID)
	case s.Reply != nil:
		_, err = fmt.Fprintf(w, "replied to %s: posted %s (seq %d)\n", s.MessageID, s.Reply.ID, s.Reply.Seq)
	default:
		_, err = fmt.Fprintf(w, "settled %s without a reply (%s)\n", s.MessageID, s.Settlement)
	}
	return err
}
