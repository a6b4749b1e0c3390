package domain

import (
	"strings"
	"testing"
)

func TestCloneURLsAreLimitedToNetworkTransportsWithoutCredentials(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://github.com/o/r.git", true},
		{"ssh://git@github.com/o/r.git", true},
		{"git://127.0.0.1:9418/r.git", true},
		{"git@github.com:o/r.git", true},
		{"ext::sh -c touch% /tmp/pwned", false},
		{"ext::ssh", false},
		{"-uhack", false},
		{"--upload-pack=evil", false},
		{"/etc", false},
		{"./repo", false},
		{"file:///etc", false},
		{"http://github.com/o/r", false},
		{"https://user:token@github.com/o/r", false},
		{"https://github.com/", false},
		{"https://github.com/o/../r", false},
		{"git@github.com:-evil", false},
		{"fd::17", false},
		{"https://github.com/o/r\n", false},
		{"", false},
	} {
		if err := ValidateCloneURL(tc.url); (err == nil) != tc.ok {
			t.Errorf("%q: err=%v, want ok=%v", tc.url, err, tc.ok)
		}
	}
}

func TestBranchNamesFollowGitsRefRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"main", true}, {"jam/feature-1", true}, {"release/v1.2", true},
		{"..", false}, {"-d", false}, {"a b", false}, {"refs/../x", false}, {"a..b", false},
		{".hidden", false}, {"x/.y", false}, {"x.lock", false}, {"x/", false}, {"/x", false}, {"a//b", false},
		{"x.", false}, {"a@{1}", false}, {"@", false}, {"a~1", false}, {"a^", false}, {"a:b", false},
		{"a?", false}, {"a*", false}, {"a[", false}, {"a\\b", false}, {"a\x01", false}, {strings.Repeat("a", 256), false},
	} {
		if err := ValidateBranchName("branch", tc.name); (err == nil) != tc.ok {
			t.Errorf("%q: err=%v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestRepoRequestsAreValidatedPerActionWithDefaults(t *testing.T) {
	r := RepoRequest{URL: "https://github.com/o/widget.git"}
	if err := ValidateRepoRequest(WorkspaceActionClone, &r); err != nil || r.Dir != "widget" {
		t.Fatalf("clone default dir: %q %v", r.Dir, err)
	}
	p := RepoRequest{Dir: "widget"}
	if err := ValidateRepoRequest(WorkspaceActionPush, &p); err != nil || p.Remote != DefaultRemote {
		t.Fatalf("push default remote: %q %v", p.Remote, err)
	}
	for name, tc := range map[string]struct {
		action WorkspaceAction
		req    RepoRequest
	}{
		"huge message":        {WorkspaceActionCommit, RepoRequest{Dir: "w", Message: strings.Repeat("m", MaxCommitMessage+1)}},
		"empty message":       {WorkspaceActionCommit, RepoRequest{Dir: "w", Message: "  "}},
		"dir escapes":         {WorkspaceActionCommit, RepoRequest{Dir: "../w", Message: "m"}},
		"dir is an option":    {WorkspaceActionBranch, RepoRequest{Dir: "-C", Branch: "b"}},
		"url outside a clone": {WorkspaceActionPush, RepoRequest{Dir: "w", URL: "https://github.com/o/r"}},
		"remote is an option": {WorkspaceActionPush, RepoRequest{Dir: "w", Remote: "--exec=x"}},
		"no title":            {WorkspaceActionPullRequest, RepoRequest{Dir: "w"}},
		"bad base":            {WorkspaceActionPullRequest, RepoRequest{Dir: "w", Title: "t", Base: "-x"}},
		"no branch":           {WorkspaceActionBranch, RepoRequest{Dir: "w"}},
		"not a repo action":   {WorkspaceActionArchive, RepoRequest{Dir: "w"}},
	} {
		if err := ValidateRepoRequest(tc.action, &tc.req); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
