package main

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/api"
)

// workspaceRepoCmd is `jam workspace repo`: git and gh in a session's workspace, through the
// workspace's one-at-a-time operations.
func workspaceRepoCmd(cf *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "repo",
		Short: "Repository operations in a managed workspace: clone, branch, commit, push, pr, checks",
		Long: `Each runs git or gh with a fixed argv in the session's workspace — inside its sandbox when
the runtime is sandboxed — as one workspace operation: recorded first, run once, and if a
crash cuts it, recorded failed (interrupted) and never replayed. Inputs are validated first
(clone URLs: https://, ssh://, git:// or user@host:path; refs by git's own rules).`,
	}
	var r api.RepositoryRequest
	run := func(action string) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, args []string) error {
			req := r
			if action == "clone" {
				req.URL = args[1]
			}
			if action == "branch" {
				req.Branch = args[1]
			}
			return runRepoOp(cf, c, args[0], action, req)
		}
	}
	dir := func(c *cobra.Command, what string) { c.Flags().StringVar(&r.Dir, "dir", "", what) }
	clone := &cobra.Command{Use: "clone WORKSPACE_ID URL [--dir DIR] [--branch B]", Short: "Clone a repository into the workspace",
		Args: cobra.ExactArgs(2), RunE: run("clone")}
	dir(clone, "destination directory (default: from the URL)")
	clone.Flags().StringVar(&r.Branch, "branch", "", "branch to check out")
	branch := &cobra.Command{Use: "branch WORKSPACE_ID BRANCH --dir DIR", Short: "Create and switch to a branch",
		Args: cobra.ExactArgs(2), RunE: run("branch")}
	dir(branch, "the repository's directory in the workspace")
	commit := &cobra.Command{Use: "commit WORKSPACE_ID --dir DIR -m MESSAGE", Short: "Commit every change, authored by the workspace's agent",
		Args: cobra.ExactArgs(1), RunE: run("commit")}
	dir(commit, "the repository's directory in the workspace")
	commit.Flags().StringVarP(&r.Message, "message", "m", "", "the commit message")
	push := &cobra.Command{Use: "push WORKSPACE_ID --dir DIR [--branch B] [--remote R]", Short: "Push a branch (default: the current one)",
		Args: cobra.ExactArgs(1), RunE: run("push")}
	dir(push, "the repository's directory in the workspace")
	push.Flags().StringVar(&r.Branch, "branch", "", "branch to push (default: the current one)")
	push.Flags().StringVar(&r.Remote, "remote", "", "remote (default: origin)")
	pr := &cobra.Command{Use: "pr WORKSPACE_ID --dir DIR --title T [--body B] [--base B]", Short: "Open (or update) the branch's pull request with gh",
		Args: cobra.ExactArgs(1), RunE: run("pull-request")}
	dir(pr, "the repository's directory in the workspace")
	pr.Flags().StringVar(&r.Title, "title", "", "pull request title")
	pr.Flags().StringVar(&r.Body, "body", "", "pull request body")
	pr.Flags().StringVar(&r.Base, "base", "", "base branch (default: the repository's)")
	pr.Flags().StringVar(&r.Branch, "branch", "", "head branch (default: the current one)")
	checks := &cobra.Command{Use: "checks WORKSPACE_ID --dir DIR [--branch B]", Short: "Show the checks of the branch's pull request",
		Args: cobra.ExactArgs(1), RunE: run("checks")}
	dir(checks, "the repository's directory in the workspace")
	checks.Flags().StringVar(&r.Branch, "branch", "", "the pull request's head branch (default: the current one)")
	var repos []string
	github := &cobra.Command{Use: "github WORKSPACE_ID [--repo OWNER/NAME]...",
		Short: "Can the workspace's guest reach and authenticate to GitHub (and these repositories)? Read-only",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			q := url.Values{}
			for _, r := range repos {
				q.Add("repo", r)
			}
			path := "/v1/workspaces/" + url.PathEscape(args[0]) + "/github"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			return showJSON(cf, c, path)
		}}
	github.Flags().StringArrayVar(&repos, "repo", nil, "a repository to check (OWNER/NAME; at most 16)")
	cmd.AddCommand(clone, branch, commit, push, pr, checks, github)
	return cmd
}

func runRepoOp(cf *clientFlags, cmd *cobra.Command, workspace, action string, req api.RepositoryRequest) error {
	raw, done, err := cf.operation(cmd, http.MethodPost, "/v1/workspaces/"+url.PathEscape(workspace)+"/repositories/"+action, req)
	if err != nil || !done {
		return err
	}
	return render(cf, cmd, raw, func(b api.WorkspaceOpBody) error {
		if err := printWorkspaceOp(cmd, b); err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		if r := b.Repository; r != nil {
			fmt.Fprintf(w, "repository %s", r.Dir)
			if r.Branch != "" {
				fmt.Fprintf(w, " on %s", r.Branch)
			}
			if r.Commit != "" {
				fmt.Fprintf(w, " at %s", r.Commit)
			}
			fmt.Fprintln(w)
			if r.PullRequestURL != "" {
				fmt.Fprintf(w, "pull request %s\n", r.PullRequestURL)
			}
			for _, c := range r.Checks {
				fmt.Fprintf(w, "  %-40s %-12s %s\n", c.Name, c.State, c.Link)
			}
		}
		return nil
	})
}
