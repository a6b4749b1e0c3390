package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
)

func roomPath(id string, rest ...string) string {
	p := "/v1/rooms/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

func newRoomCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "room", Short: "Rooms, their participants and transcripts"}
	cf := addClientFlags(cmd)

	var createHumans []string
	create := &cobra.Command{
		Use: "create NAME", Short: "Create a room", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodPost, "/v1/rooms", api.CreateRoomRequest{Name: args[0]})
			if err != nil {
				return err
			}
			for _, h := range createHumans {
				var r api.RoomBody
				if err := json.Unmarshal(raw, &r); err != nil {
					return fmt.Errorf("decode response: %w", err)
				}
				if _, err := cf.call(cmd, http.MethodPost, roomPath(r.ID.String(), "participants"), api.AddParticipantRequest{Human: &h}); err != nil {
					return fmt.Errorf("room %s created; adding %s failed: %w", r.ID, h, err)
				}
			}
			return render(cf, cmd, raw, func(r api.RoomBody) error {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "created room %s (%s)\n", r.Name, r.ID)
				return err
			})
		},
	}
	create.Flags().StringArrayVar(&createHumans, "human", nil, "add a human participant with this name (repeatable)")
	list := listCmd(cf, "list", "List rooms", cobra.NoArgs, fixed("/v1/rooms"), "ID\tNAME\tCREATED",
		func(out api.RoomList) [][]string {
			rows := make([][]string, len(out.Items))
			for i, r := range out.Items {
				rows[i] = []string{r.ID.String(), r.Name, r.CreatedAt.Format("2006-01-02 15:04")}
			}
			return rows
		})
	show := &cobra.Command{
		Use: "show ID", Short: "Show a room and its participants", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return showJSON(cf, cmd, roomPath(args[0])) },
	}

	var agentID, human string
	add := &cobra.Command{
		Use: "add ROOM_ID (--agent AGENT_ID | --human NAME)", Short: "Add a participant (an owned agent is bound to a runtime session)",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.AddParticipantRequest{}
			if agentID != "" {
				req.AgentID = &agentID
			}
			if human != "" {
				req.Human = &human
			}
			raw, err := cf.call(cmd, http.MethodPost, roomPath(args[0], "participants"), req)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(p api.ParticipantBody) error {
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "added participant %s\n", p.ID)
				if p.Session != nil {
					verb := "bound new"
					if p.Session.Reused {
						verb = "re-bound earlier"
					}
					fmt.Fprintf(w, "%s runtime session %s (%s)\n", verb, p.Session.RuntimeSessionID, p.Session.Alias)
				}
				return nil
			})
		},
	}
	add.Flags().StringVar(&agentID, "agent", "", "agent id")
	add.Flags().StringVar(&human, "human", "", "human name")

	remove := &cobra.Command{
		Use: "remove ROOM_ID PARTICIPANT_ID", Short: "Remove a participant (an owned agent's binding is kept as a tombstone)",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := cf.call(cmd, http.MethodDelete, roomPath(args[0], "participants", url.PathEscape(args[1])), nil); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "removed", args[1])
			return nil
		},
	}

	var postAuthor string
	var postWait time.Duration
	post := &cobra.Command{
		Use: "post ROOM_ID TEXT", Short: "Post a message as a human (operator token) or as an agent (--key)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := cf.call(cmd, http.MethodPost, roomPath(args[0], "messages"), api.PostMessageRequest{Text: args[1], Author: postAuthor})
			if err != nil {
				return err
			}
			if postWait <= 0 {
				return render(cf, cmd, raw, func(m api.MessageBody) error {
					_, err := fmt.Fprintf(cmd.OutOrStdout(), "posted %s (seq %d)\n", m.ID, m.Seq)
					return err
				})
			}
			var m api.MessageBody
			if err := json.Unmarshal(raw, &m); err != nil {
				return fmt.Errorf("decode response: %w", err)
			}
			reply, err := waitReply(cmd, cf, m, postWait)
			if err != nil {
				return err
			}
			return render(cf, cmd, reply, func(r api.MessageBody) error {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s\n", r.Text)
				return err
			})
		},
	}
	post.Flags().StringVar(&postAuthor, "author", "", "human participant to post as (default: the room's only human)")
	post.Flags().DurationVar(&postWait, "wait", 0, "wait this long for the first reply to the message and print it (e.g. 60s)")
	addKeyFlag(post, cf, "post as the attached agent with this API key")

	var after string
	var limit int
	messages := &cobra.Command{
		Use: "messages ROOM_ID", Short: "Print a page of the transcript", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if after != "" {
				q.Set("after", after)
			}
			raw, err := cf.call(cmd, http.MethodGet, roomPath(args[0], "messages")+"?"+q.Encode(), nil)
			if err != nil {
				return err
			}
			return render(cf, cmd, raw, func(out api.MessageList) error {
				w := cmd.OutOrStdout()
				authors := newAuthorNamer(cf, cmd)
				for _, m := range out.Items {
					fmt.Fprintf(w, "[%d] %s: %s\n", m.Seq, authors.name(m), m.Text)
				}
				if out.NextCursor != "" {
					fmt.Fprintf(w, "(more: --after %s)\n", out.NextCursor)
				}
				return nil
			})
		},
	}
	messages.Flags().StringVar(&after, "after", "", "cursor from the previous page")
	messages.Flags().IntVar(&limit, "limit", 100, "page size (at most 500)")

	var from string
	tail := &cobra.Command{
		Use:   "tail ROOM_ID",
		Short: "Follow a room's events (messages, membership) until interrupted; reconnects and resumes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			authors := newAuthorNamer(cf, cmd)
			return c.Stream(cmd.Context(), "/v1/events?room="+url.QueryEscape(args[0]), from, func(e client.Event) error {
				if cf.json {
					b, err := json.Marshal(e.Data)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintln(w, string(b))
					return err
				}
				return printEvent(w, e, authors)
			})
		},
	}
	tail.Flags().StringVar(&from, "from", "", "resume after this event id (default: from now)")

	cmd.AddCommand(create, list, show, add, remove, post, messages, tail)
	return cmd
}

func printEvent(w interface{ Write([]byte) (int, error) }, e client.Event, authors *authorNamer) error {
	switch domain.EventKind(e.Kind) {
	case domain.EventMessagePosted:
		var m api.MessageBody
		if err := json.Unmarshal(e.Data.Payload, &m); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "[%d] %s: %s\n", m.Seq, authors.name(m), m.Text)
		return err
	case domain.EventInboundQueued, domain.EventKind(domain.StreamOpen):
		return nil // per-recipient queue rows and the stream's own position: noise in a room view
	case domain.EventRuntimeFailed:
		// The human waiting in the room needs to know nobody will answer, and what helps.
		var f struct {
			Session uuid.UUID           `json:"runtime_session"`
			Class   domain.FailureClass `json:"class"`
			Reason  string              `json:"reason"`
		}
		if err := json.Unmarshal(e.Data.Payload, &f); err != nil {
			return err
		}
		who := "an agent"
		if e.Data.AgentID != nil {
			who = authors.agentName(*e.Data.AgentID)
		}
		_, err := fmt.Fprintf(w, "!! %s cannot start (%s): %s\n   messages stay queued; after fixing the cause: jam session restart %s\n",
			who, f.Class, f.Reason, f.Session)
		return err
	default:
		_, err := fmt.Fprintf(w, "-- %s %s\n", e.Kind, string(e.Data.Payload))
		return err
	}
}

// replyPoll is how often `room post --wait` reads the transcript.
const replyPoll = 100 * time.Millisecond

// waitReply reads the room's transcript after m until a message replying to m appears, and
// returns it raw; it fails once wait has passed.
func waitReply(cmd *cobra.Command, cf *clientFlags, m api.MessageBody, wait time.Duration) ([]byte, error) {
	deadline := time.Now().Add(wait)
	after := m.Seq
	for {
		raw, err := cf.call(cmd, http.MethodGet, roomPath(m.RoomID.String(), "messages")+"?after="+strconv.FormatInt(after, 10), nil)
		if err != nil {
			return nil, err
		}
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("decode transcript: %w", err)
		}
		for _, item := range page.Items {
			var r api.MessageBody
			if err := json.Unmarshal(item, &r); err != nil {
				return nil, fmt.Errorf("decode message: %w", err)
			}
			after = r.Seq
			if r.ReplyTo != nil && *r.ReplyTo == m.ID {
				return item, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no reply to %s within %s (it may still come: jam room messages %s)", m.ID, wait, m.RoomID)
		}
		select {
		case <-cmd.Context().Done():
			return nil, cmd.Context().Err()
		case <-time.After(replyPoll):
		}
	}
}
