package domain

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxReplyBytes bounds one agent reply (posted as messages of at most MaxMessageBytes each,
// every one but the last at least half that, so 33 at most): a longer reply keeps its first
// MaxReplyBytes and says how much was cut.
const MaxReplyBytes = 1 << 20

// citationBlock is a Codex memory citation block (<oai-mem-citation>…</oai-mem-citation>):
// bookkeeping of the provider's memory feature, not text for the room.
var citationBlock = regexp.MustCompile(`(?s)\s*<oai-mem-citation\b[^>]*>.*?</oai-mem-citation>\s*$`)

// ReplyText is what of an agent's reply is posted: its trailing memory citation blocks
// stripped, and at most MaxReplyBytes (the rest cut, with a line saying so).
func ReplyText(text string) string {
	for {
		loc := citationBlock.FindStringIndex(text)
		if loc == nil || inCodeFence(text[:loc[0]]) {
			break
		}
		text = text[:loc[0]]
	}
	if len(text) <= MaxReplyBytes {
		return text
	}
	note := "\n\n[Jam cut this reply: " + strconv.Itoa(len(text)-MaxReplyBytes) + " more bytes were over its " +
		strconv.Itoa(MaxReplyBytes>>20) + " MiB limit]"
	return Truncate(text, MaxReplyBytes-len(note)) + note
}

// inCodeFence reports whether text ends inside a ``` fenced block (a citation quoted in
// code is text, not a block to strip).
func inCodeFence(text string) bool {
	return strings.Count(text, "```")%2 == 1
}

// SplitReply splits an agent's reply into the parts it is posted as, in order, each at most
// MaxMessageBytes: at a paragraph break where one falls in the second half of a part, else
// at a line break, else at a space, else at a character boundary. The parts joined are the
// text, so nothing is lost; a reply that fits is one part.
func SplitReply(text string) []string {
	return splitAt(text, MaxMessageBytes)
}

func splitAt(text string, limit int) []string {
	var parts []string
	for len(text) > limit {
		cut := cutPoint(text, limit)
		parts = append(parts, text[:cut])
		text = text[cut:]
	}
	if text != "" || len(parts) == 0 {
		parts = append(parts, text)
	}
	return parts
}

// cutPoint is where the next part of text (longer than limit) ends: after the last paragraph
// break, line break or space within limit bytes that lies in their second half, else at the
// last character boundary within them.
func cutPoint(text string, limit int) int {
	for _, sep := range []string{"\n\n", "\n", " "} {
		if i := strings.LastIndex(text[:limit], sep); i >= limit/2 {
			return i + len(sep)
		}
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	if cut == 0 {
		return limit // not UTF-8 after all: bytes, as they are
	}
	return cut
}
