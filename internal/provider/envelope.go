package provider

import (
	"fmt"
	"strings"

	"github.com/jam-dev/jam/internal/domain"
)

// EnvelopeStyle says how a runtime settles, which decides what its prompts tell it.
type EnvelopeStyle int

const (
	// ExplicitDisposition: tool-capable runtimes settle each message with
	// jam_reply_to_message / jam_no_reply.
	ExplicitDisposition EnvelopeStyle = iota
	// FinalResponse: runtimes without tools (ACP); Jam posts the final response.
	FinalResponse
)

// Envelope is one turn's prompt.
type Envelope struct {
	Style    EnvelopeStyle
	Messages []Message
	// Preamble (briefing and roster) is prepended when set: once per thread for runtimes
	// with an instruction channel, on the first prompt of a connection and when it changed
	// for ACP.
	Preamble string
	// Membership says how the room's participants changed since the runtime's last turn
	// (RosterChanges; "" when they did not).
	Membership string
	// Steered: the messages join a turn that is already running.
	Steered bool
	// Tools: a final-response runtime also has Jam's tools (over MCP), so it may settle a
	// message itself.
	Tools bool
}

// Envelope markers. The test agent reads the message blocks, so they are stable. A context
// block opens with its own marker, so a reader of "[message" blocks passes over it.
const (
	messageOpen  = "[message %d of %d] id=%s from=%s (%s)"
	contextOpen  = "[context message %d of %d] id=%s from=%s (%s)"
	messageClose = "[end message]"
	noticeMarker = "[JAM NOTICE]"
)

const (
	explicitInstructions = "Settle every message above with a tool: call " + domain.ToolReplyToMessage +
		" {message_id, text} to answer it in the room, or " + domain.ToolNoReply +
		" {message_id, reason} when it needs no answer. Only these tools reach the room; your final text is not posted."
	steeredInstructions = "These messages arrived while you were working; they join your current turn. " + explicitInstructions
	finalInstructions   = "Your final response will be posted to the room by Jam as your reply. " +
		"If the message needs no answer, end your turn without any response text."
	finalToolsInstructions = " You also have Jam's tools: " + domain.ToolReplyToMessage + " {message_id, text} answers a message, " +
		domain.ToolNoReply + " {message_id, reason} settles one without an answer; once you settle any message with a tool, " +
		"your final response is not posted at all, so settle each message with a tool."
	noticeInstructions  = "This is a notice from Jam, not a room message. Do not reply to it in the room."
	contextInstructions = "Messages marked [context message] are context only (agents have answered each other past the " +
		"room's hop limit since a human last wrote, or the message is a question put to someone else). " +
		"They need no answer: do not reply to them."
)

// RenderEnvelope renders a turn's prompt: the preamble, each message as a delimited block,
// and the settlement instructions of the style. A turn made only of Jam notices gets the
// notice envelope, which says not to reply. Context messages (past the room's hop limit, or a question
// put to someone else) get their own block marker and a note that they need no answer; a turn made only of
// notices and context gets no settlement instructions.
func RenderEnvelope(e Envelope) string {
	var b strings.Builder
	if p := strings.TrimSpace(e.Preamble); p != "" {
		b.WriteString(p)
		b.WriteString("\n\n")
	}
	if m := strings.TrimSpace(e.Membership); m != "" {
		b.WriteString(m)
		b.WriteString("\n\n")
	}
	notices, contexts := 0, 0
	for i, m := range e.Messages {
		if m.Notice {
			notices++
			fmt.Fprintf(&b, "%s %s\n%s\n\n", noticeMarker, m.Text, noticeInstructions)
			continue
		}
		kind := "agent"
		if m.FromHuman() {
			kind = "human"
		}
		open := messageOpen
		if m.Context {
			contexts++
			open = contextOpen
		}
		fmt.Fprintf(&b, open+"\n%s\n%s\n\n", i+1, len(e.Messages), m.ID, displayName(m.AuthorName), kind, m.Text, messageClose)
	}
	if notices+contexts < len(e.Messages) {
		switch {
		case e.Style == FinalResponse:
			b.WriteString(finalInstructions)
			if e.Tools {
				b.WriteString(finalToolsInstructions)
			}
		case e.Steered:
			b.WriteString(steeredInstructions)
		default:
			b.WriteString(explicitInstructions)
		}
		b.WriteString("\n\n")
	}
	if contexts > 0 {
		b.WriteString(contextInstructions)
	}
	return strings.TrimRight(b.String(), "\n")
}

func displayName(n string) string {
	n = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '[' || r == ']' {
			return ' '
		}
		return r
	}, n)
	if strings.TrimSpace(n) == "" {
		return "unknown"
	}
	return n
}

// OperatorBriefingHeader heads the operator's briefing in every runtime's instructions.
const OperatorBriefingHeader = "## Operator briefing"

// Preamble renders the operator briefing and the room roster sections, the session-level
// context every runtime gets (as instructions where it has a channel for them).
func Preamble(briefing string, r Roster) string {
	var b strings.Builder
	if br := strings.TrimSpace(briefing); br != "" {
		fmt.Fprintf(&b, "%s\nYour operator wrote this briefing for you; follow it.\n\n%s\n\n", OperatorBriefingHeader, br)
	}
	if r.RoomName != "" || len(r.Members) > 0 {
		b.WriteString("## Room\n")
		if r.AgentName != "" {
			fmt.Fprintf(&b, "You are %s, an agent in the room %q.", displayName(r.AgentName), r.RoomName)
		} else {
			fmt.Fprintf(&b, "You are an agent in the room %q.", r.RoomName)
		}
		if len(r.Members) > 0 {
			names := make([]string, len(r.Members))
			for i, m := range r.Members {
				names[i] = m.String()
			}
			fmt.Fprintf(&b, " Participants: %s.", strings.Join(names, ", "))
		}
		b.WriteString("\n")
	}
	return strings.TrimSpace(b.String())
}
