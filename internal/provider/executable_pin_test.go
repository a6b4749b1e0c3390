package provider

import (
	"context"
	"strings"
	"testing"
)

// A pin that names a file which is not an executable (the operator saved /etc/passwd, which
// passes the save-time check as a template command naming it does) is verified where it
// runs, as an explicit command is: refused, naming the pin, and never replaced by a copy on
// PATH.
func TestAPinThatIsNotAnExecutableFileIsRefusedWhereItRuns(t *testing.T) {
	t.Parallel()
	good := toolDir(t, `echo "agent 1.0.0"`)
	for _, tc := range []struct {
		req    ExecutableRequest
		source ExecutableSource
	}{
		{ExecutableRequest{Pins: map[string]string{testCommand: "/etc/passwd"}}, SourcePin},
		{ExecutableRequest{Explicit: "/etc/passwd"}, SourceExplicit},
	} {
		req := tc.req
		req.Command, req.Env, req.PATH = testCommand, noEnv, good
		got, err := ResolveExecutable(context.Background(), req)
		r := requireRefusal(t, err)
		if got != (ResolvedExecutable{}) || len(r.Candidates) != 1 {
			t.Fatalf("%s: %+v, candidates %+v", tc.source, got, r.Candidates)
		}
		c := r.Candidates[0]
		if c.Path != "/etc/passwd" || c.Source != tc.source || !strings.Contains(c.Reason, "not executable") {
			t.Fatalf("%s: candidate %+v", tc.source, c)
		}
	}
}
