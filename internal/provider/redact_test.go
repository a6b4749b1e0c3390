package provider

import (
	"strings"
	"testing"
)

// Issue 43: permission summaries carried raw tool input (a token on a command line, an
// Authorization header) to the room and the API. Every adapter's text goes through one
// redactor; these are the hostile inputs it must clean, and ordinary text it must leave.
func TestTheRedactorRemovesSecretsFromHostileInput(t *testing.T) {
	red := NewRedactor([]string{"STUB_KEY=sk-live-0123456789", "SHORT=abc", "PATH=/usr/bin", "DB_URL=postgres://app:pw@db/x"},
		[]string{"STUB_KEY", "SHORT", "DB_URL"})
	cases := []struct {
		name   string
		in     string
		gone   []string // must not survive
		kept   []string // must survive
		redact bool     // the output says it redacted
	}{
		{"flag with equals", "deploy --token=s3cr3t --dry-run", []string{"s3cr3t"}, []string{"deploy", "--token=", "--dry-run"}, true},
		{"flag with a space", "mysql --password hunter22 -h db", []string{"hunter22"}, []string{"mysql", "-h db"}, true},
		{"api key flag", "tool --api-key=AbC123xyz", []string{"AbC123xyz"}, []string{"--api-key="}, true},
		{"bearer header", `curl -H "Authorization: Bearer abc" https://api`, []string{"abc\""}, []string{"curl", "https://api"}, true},
		{"basic header", `curl -H 'Authorization: Basic dXNlcjpwYXNz' x`, []string{"dXNlcjpwYXNz"}, []string{"curl"}, true},
		{"token header", "Authorization: token ghp_notreallyatokenbutlong", []string{"ghp_notreallyatokenbutlong"}, nil, true},
		{"bare bearer", "sent Bearer eyJhbGciOi.payload.sig upstream", []string{"eyJhbGciOi"}, []string{"upstream"}, true},
		{"api key header", "X-Api-Key: 12345-abcde", []string{"12345-abcde"}, nil, true},
		{"cookie header", "Cookie: session=abcdef; other=1", []string{"abcdef"}, nil, true},
		{"url with user and password", "git clone https://bob:pa55word@github.com/o/r.git", []string{"pa55word"}, []string{"bob:", "@github.com/o/r.git"}, true},
		{"key=value", "export GITHUB_TOKEN=ghx_abcdefgh && make", []string{"ghx_abcdefgh"}, []string{"&& make"}, true},
		{"json key", `{"password": "hunter2", "user": "ada"}`, []string{"hunter2"}, []string{`"user": "ada"`}, true},
		{"json escaped in json", `{"command":"curl -H \"Authorization: Bearer abc\" --token=s3cr3t x","description":"call"}`,
			[]string{"abc\\", "s3cr3t"}, []string{`"description":"call"`}, true},
		{"yaml", "client_secret: shh-very-secret\nname: app", []string{"shh-very-secret"}, []string{"name: app"}, true},
		{"curl user", "curl -u admin:letmein https://x", []string{"letmein"}, []string{"admin:"}, true},
		{"github token shape", "echo ghp_0123456789abcdefghijABCDEFGHIJ", []string{"ghp_0123456789abcdefghijABCDEFGHIJ"}, []string{"echo"}, true},
		{"openai key shape", "OPENAI=sk-proj-abcdefghijklmnop1234", []string{"sk-proj-abcdefghijklmnop1234"}, nil, true},
		{"aws access key", "aws configure set aws_access_key_id AKIAABCDEFGHIJKLMNOP", []string{"AKIAABCDEFGHIJKLMNOP"}, nil, true},
		{"template env value", "the key is sk-live-0123456789 ok", []string{"sk-live-0123456789"}, []string{"the key is", "ok"}, true},
		{"template env value inside a url", "connect postgres://app:pw@db/x now", []string{"postgres://app:pw@db/x"}, []string{"connect", "now"}, true},
		{"a short env value is not a secret", "abc is the alphabet", nil, []string{"abc is the alphabet"}, false},
		{"an unnamed variable is not redacted", "ls /usr/bin", nil, []string{"ls /usr/bin"}, false},
		{"ordinary text", "Run the tests with make test and read the token docs", nil, []string{"make test", "token docs"}, false},
		{"redacting twice changes nothing", "--token=" + Redacted, nil, []string{"--token=" + Redacted}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := red.Redact(c.in)
			for _, g := range c.gone {
				if strings.Contains(got, g) {
					t.Errorf("Redact(%q) = %q still holds %q", c.in, got, g)
				}
			}
			for _, k := range c.kept {
				if !strings.Contains(got, k) {
					t.Errorf("Redact(%q) = %q lost %q", c.in, got, k)
				}
			}
			if strings.Contains(got, Redacted) != c.redact {
				t.Errorf("Redact(%q) = %q: redacted %v, want %v", c.in, got, !c.redact, c.redact)
			}
			if again := red.Redact(got); again != got {
				t.Errorf("redacting again changed %q to %q", got, again)
			}
		})
	}
	var none *Redactor
	if got := none.Redact("--token=s3cr3t"); strings.Contains(got, "s3cr3t") {
		t.Errorf("a nil redactor kept a shaped secret: %q", got)
	}
}
