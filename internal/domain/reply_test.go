package domain

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Issue 43: a reply over 64 KiB was cut. It is posted as ordered parts, each within the
// limit, split at the best boundary available, and the parts joined are the reply.
func TestALongReplySplitsIntoOrderedPartsThatLoseNothing(t *testing.T) {
	para := strings.Repeat("word ", 2000) + "\n\n" // 10 KiB paragraphs
	lines := strings.Repeat(strings.Repeat("x", 99)+"\n", 1000)
	cases := []struct {
		name  string
		text  string
		parts int
		// ends says what every part but the last ends with ("" when any cut will do).
		ends string
	}{
		{"fits", "short answer", 1, ""},
		{"exactly the limit", strings.Repeat("a", MaxMessageBytes), 1, ""},
		{"paragraphs", strings.Repeat(para, 20), 4, "\n\n"},
		{"lines", lines + lines, 4, "\n"},
		{"words", strings.Repeat("word ", 40000), 4, " "},
		{"one long word", strings.Repeat("y", 200<<10), 4, ""},
		{"multi-byte runes", strings.Repeat("é", 100<<10), 4, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parts := SplitReply(c.text)
			if len(parts) != c.parts {
				t.Fatalf("%d parts, want %d", len(parts), c.parts)
			}
			if strings.Join(parts, "") != c.text {
				t.Fatal("the parts joined are not the reply")
			}
			for i, p := range parts {
				if len(p) > MaxMessageBytes || p == "" || !utf8.ValidString(p) {
					t.Fatalf("part %d: %d bytes, valid UTF-8 %v", i, len(p), utf8.ValidString(p))
				}
				if i < len(parts)-1 && c.ends != "" && !strings.HasSuffix(p, c.ends) {
					t.Fatalf("part %d ends %q, want a cut after %q", i, p[len(p)-10:], c.ends)
				}
			}
		})
	}
}

func TestReplyTextStripsTrailingCitationsAndBoundsTheReply(t *testing.T) {
	citation := "\n<oai-mem-citation>\n<citation_entries>\nMEMORY.md:1-1|note=[x]\n</citation_entries>\n<rollout_ids>\n</rollout_ids>\n</oai-mem-citation>\n"
	cases := []struct{ name, in, want string }{
		{"plain", "hello", "hello"},
		{"a trailing citation", "Done." + citation, "Done."},
		{"two trailing citations", "Done." + citation + citation, "Done."},
		{"a citation mid-text stays", "a" + citation + "b", "a" + citation + "b"},
		{"a citation quoted in code stays", "```\n" + "x" + citation, "```\n" + "x" + citation},
	}
	for _, c := range cases {
		if got := ReplyText(c.in); got != c.want {
			t.Errorf("%s: ReplyText = %q, want %q", c.name, got, c.want)
		}
	}
	huge := strings.Repeat("z", MaxReplyBytes+10)
	got := ReplyText(huge)
	if len(got) > MaxReplyBytes || !strings.Contains(got, "Jam cut this reply: 10 more bytes") {
		t.Fatalf("an over-long reply: %d bytes, ends %q", len(got), got[len(got)-80:])
	}
	if n := len(SplitReply(got)); n > 2*MaxReplyBytes/MaxMessageBytes+1 {
		t.Fatalf("the bounded reply is %d parts", n)
	}
}
