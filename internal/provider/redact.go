package provider

import (
	"regexp"
	"slices"
	"strings"
)

// Redacted replaces every secret a Redactor finds.
const Redacted = "[REDACTED]"

// minSecretValue is the shortest environment value redacted verbatim: shorter ones ("1",
// "yes") are flags, not secrets, and would blank out ordinary words.
const minSecretValue = 4

// secretName is what a key, flag or variable name holding a secret looks like.
const secretName = `[A-Za-z0-9_.-]*(?:token|secret|passw(?:or)?d|passwd|pwd|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credentials?)[A-Za-z0-9_.-]*`

// redactions are the shapes of secrets in command lines, headers, URLs and tool input (JSON,
// possibly JSON-escaped once more). Each keeps its first group (what names the secret) and
// replaces the rest of the match (up to an optional second group, kept too) with Redacted.
var redactions = []*regexp.Regexp{
	// Authorization: Bearer abc / Basic abc / token abc (quoted, escaped or bare).
	regexp.MustCompile(`(?i)(\bauthorization\\?["']?\s*[:=]\s*\\?["']?\s*(?:bearer|basic|token|digest|negotiate)?\s*)[^\s"'\\,;]+`),
	// A bearer credential anywhere else (curl -u is user:password, below).
	regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{3,}`),
	// Other credential headers.
	regexp.MustCompile(`(?i)(\b(?:x-api-key|api-key|x-auth-token|private-token|cookie|set-cookie|proxy-authorization)\\?["']?\s*:\s*\\?["']?)[^\r\n"'\\]+`),
	// A URL's user:password.
	regexp.MustCompile(`(?i)(\b[a-z][a-z0-9+.-]*://[^/\s:@"'\\]+:)[^@\s/"'\\]+(@)`),
	// --token=s3cr3t, --password s3cr3t, -p s3cr3t is too short a flag to know.
	regexp.MustCompile(`(?i)((?:^|[\s"'=(])--?` + secretName + `(?:=|\s+))[^\s"'\\-][^\s"'\\]*`),
	// key=value, key: value, "key": "value" (also with escaped quotes).
	regexp.MustCompile(`(?i)(\b` + secretName + `\\?["']?\s*[:=]\s*\\?["']?)[^\s"'&,;\\}\])]+`),
	// curl -u user:password / --user user:password.
	regexp.MustCompile(`((?:^|\s)(?:-u|--user)\s+[^\s:"'\\]+:)[^\s"'\\]+`),
	// Well-known token shapes: GitHub, OpenAI/Anthropic-style keys, Slack, AWS access keys.
	regexp.MustCompile(`()\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b`),
}

// Redactor removes secrets from text a runtime produced (permission summaries, tool titles,
// status and error lines) before it reaches the broker, the event stream or a room: values of
// the environment variables its template names, and anything shaped like a credential. It is
// the one redactor every adapter's text goes through (Spec.AskPermission and the Stamper).
// The zero value (and nil) redacts by shape only.
type Redactor struct {
	values []string
}

// NewRedactor redacts, besides the shapes, the values of the variables named in env
// ("NAME=value" entries; names not listed are ignored).
func NewRedactor(env []string, names []string) *Redactor {
	r := &Redactor{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !slices.Contains(names, k) || len(strings.TrimSpace(v)) < minSecretValue {
			continue
		}
		r.values = append(r.values, v)
	}
	// Longest first, so a value containing another is replaced whole.
	slices.SortFunc(r.values, func(a, b string) int { return len(b) - len(a) })
	r.values = slices.Compact(r.values)
	return r
}

// Redact returns s with every secret replaced by Redacted.
func (r *Redactor) Redact(s string) string {
	if s == "" {
		return s
	}
	if r != nil {
		for _, v := range r.values {
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	for _, re := range redactions {
		s = redactMatches(re, s)
	}
	return s
}

// redactMatches replaces what each match of re holds between its first group and its
// optional second one, unless it is a redaction already.
func redactMatches(re *regexp.Regexp, s string) string {
	var b strings.Builder
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		from, to := m[3], m[1]
		if len(m) > 4 && m[4] >= 0 {
			to = m[4]
		}
		if from < 0 || from >= to || strings.HasPrefix(s[from:], Redacted) {
			continue
		}
		b.WriteString(s[last:from])
		b.WriteString(Redacted)
		last = to
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
