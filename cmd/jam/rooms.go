package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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

	var agentID, human, template string
	add := &cobra.Command{
		Use:   "add ROOM_ID (--agent AGENT_ID [--template ALIAS|ID] | --human NAME)",
		Short: "Add a participant (an owned agent is bound to a runtime session made from its template)",
		Long: `Add a participant. An owned agent's room runs the template --template names (an alias or
an id of one of the agent's templates; default: its first, the one jam agent create made).
Adding an agent back to a room reuses its earlier runtime session, template and thread.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.AddParticipantRequest{}
			if agentID != "" {
				req.AgentID = &agentID
			}
			if template != "" {
				if _, err := uuid.Parse(template); err == nil {
					req.TemplateID = &template
				} else {
					req.Alias = &template
				}
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
					fmt.Fprintf(w, "%s runtime session %s (%s, %s)\n", verb, p.Session.RuntimeSessionID, p.Session.Alias, p.Session.Transport)
				}
				return nil
			})
		},
	}
	add.Flags().StringVar(&agentID, "agent", "", "agent id")
	add.Flags().StringVar(&human, "human", "", "human name")
	add.Flags().StringVar(&template, "template", "", "an owned agent's template (alias or id) the room runs (default: the agent's first)")

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
	post.Flags().DurationVar(&postWait, "wait", 0, "wait this long for the first reply to the message and print it (e.g. 60s); "+
		"returns early when no agent can answer. Exit 0: the reply; 3: the room's agents cannot start (the cause and the fix printed); 4: no reply in time; 5: no agent in the room")
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
	case domain.EventThreadReplaced:
		// A switch of provider, or a thread that could not be resumed: the room's history
		// with the agent does not carry over, which the humans in it need to know.
		var r struct {
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(e.Data.Payload, &r); err != nil {
			return err
		}
		who := "an agent"
		if e.Data.AgentID != nil {
			who = authors.agentName(*e.Data.AgentID)
		}
		_, err := fmt.Fprintf(w, "!! %s continues on a new thread: %s\n", who, r.Reason)
		return err
	case domain.EventRuntimeRecycled:
		// The watchdog restarted the agent's provider: a turn may have been cut (its
		// messages are answered again by the new process), which people in the room see.
		var r struct {
			Reason   domain.RecycleReason `json:"reason"`
			Measured string               `json:"measured"`
			Held     bool                 `json:"held"`
		}
		if err := json.Unmarshal(e.Data.Payload, &r); err != nil {
			return err
		}
		who := "an agent"
		if e.Data.AgentID != nil {
			who = authors.agentName(*e.Data.AgentID)
		}
		then := "restarted on the same thread"
		if r.Held {
			then = "held: it was recycled too often"
		}
		_, err := fmt.Fprintf(w, "!! %s was recycled by the watchdog (%s: %s); %s\n", who, r.Reason, r.Measured, then)
		return err
	default:
		_, err := fmt.Fprintf(w, "-- %s %s\n", e.Kind, string(e.Data.Payload))
		return err
	}
}

// replyPoll is how often `room post --wait` reads the transcript; sessionPoll how often it
// reads the room's runtime sessions for a failure.
const (
	replyPoll   = 100 * time.Millisecond
	sessionPoll = 500 * time.Millisecond
)

// Exit codes of `jam room post --wait` besides 0 (the reply was printed) and 1 (the post or
// the API failed), so a script can tell what happened.
const (
	exitAgentsFailed = 3 // every agent that could answer cannot start
	exitNoReply      = 4 // no reply within --wait
	exitNoAgent      = 5 // no agent in the room to answer
)

// waitReply reads the room's transcript after m until a message replying to m appears, and
// returns it raw. It stops early when no agent can answer: the room has none besides the
// author, or every one of them is an owned agent whose runtime cannot start (each failure
// printed with the command that retries it once the cause is fixed). It fails once wait
// has passed, naming any runtime's last error.
func waitReply(cmd *cobra.Command, cf *clientFlags, m api.MessageBody, wait time.Duration) ([]byte, error) {
	deadline := time.Now().Add(wait)
	room := m.RoomID.String()
	answerers, err := roomAnswerers(cmd, cf, room, m)
	if err != nil {
		return nil, err
	}
	if answerers == 0 {
		return nil, &exitError{code: exitNoAgent, err: fmt.Errorf(
			"no agent in room %s can answer: add one (jam room add %s --agent AGENT_ID)", room, room)}
	}
	after := m.Seq
	var sessions []api.SessionBody
	var lastFailures map[uuid.UUID]time.Time
	nextSessions := time.Now()
	for {
		raw, err := cf.call(cmd, http.MethodGet, roomPath(room, "messages")+"?after="+strconv.FormatInt(after, 10), nil)
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
		if !time.Now().Before(nextSessions) {
			nextSessions = time.Now().Add(sessionPoll)
			if sessions, err = roomSessions(cmd, cf, room); err != nil {
				return nil, err
			}
			// A failure counts once two reads apart show it unchanged: a save or restart
			// just made clears it within milliseconds, and must not end the wait.
			failed, now := failedSessions(sessions), map[uuid.UUID]time.Time{}
			settled := 0
			for _, s := range failed {
				now[s.RuntimeSessionID] = s.Failure.At
				if at, ok := lastFailures[s.RuntimeSessionID]; ok && at.Equal(s.Failure.At) {
					settled++
				}
			}
			lastFailures = now
			if len(failed) > 0 && settled == len(failed) && len(failed) >= answerers {
				return nil, &exitError{code: exitAgentsFailed, err: errors.New(describeFailures(failed))}
			}
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("no reply to %s within %s (it may still come: jam room messages %s)", m.ID, wait, room)
			for _, s := range sessions {
				if s.Runtime != nil && s.Runtime.LastError != "" {
					msg += fmt.Sprintf("\n  runtime session %s (%s): last error: %s", s.RuntimeSessionID, s.Alias, s.Runtime.LastError)
				}
			}
			if failed := failedSessions(sessions); len(failed) > 0 {
				msg += "\n" + describeFailures(failed)
			}
			return nil, &exitError{code: exitNoReply, err: errors.New(msg)}
		}
		select {
		case <-cmd.Context().Done():
			return nil, cmd.Context().Err()
		case <-time.After(replyPoll):
		}
	}
}

// roomAnswerers counts the room's agents other than m's author: the ones that may answer.
func roomAnswerers(cmd *cobra.Command, cf *clientFlags, room string, m api.MessageBody) (int, error) {
	raw, err := cf.call(cmd, http.MethodGet, roomPath(room), nil)
	if err != nil {
		return 0, err
	}
	var r api.RoomBody
	if err := json.Unmarshal(raw, &r); err != nil {
		return 0, fmt.Errorf("decode room: %w", err)
	}
	n := 0
	for _, p := range r.Participants {
		if p.Kind == domain.ParticipantAgent && p.AgentID != nil && (m.AuthorAgentID == nil || *p.AgentID != *m.AuthorAgentID) {
			n++
		}
	}
	return n, nil
}

func roomSessions(cmd *cobra.Command, cf *clientFlags, room string) ([]api.SessionBody, error) {
	raw, err := cf.call(cmd, http.MethodGet, "/v1/sessions?room="+url.QueryEscape(room), nil)
	if err != nil {
		return nil, err
	}
	var out api.SessionList
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode sessions: %w", err)
	}
	return out.Items, nil
}

func failedSessions(sessions []api.SessionBody) []api.SessionBody {
	var out []api.SessionBody
	for _, s := range sessions {
		if s.Failure != nil && !s.Removed {
			out = append(out, s)
		}
	}
	return out
}

// describeFailures says why each failed runtime cannot start and what retries it.
func describeFailures(failed []api.SessionBody) string {
	var b strings.Builder
	for i, s := range failed {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "runtime session %s (%s) cannot start (%s): %s\n  messages stay queued; after fixing the cause: jam session restart %s",
			s.RuntimeSessionID, s.Alias, s.Failure.Class, s.Failure.Reason, s.RuntimeSessionID)
	}
	return b.String()
}
