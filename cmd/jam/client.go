package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
)

// clientFlags are the flags of every API client command.
type clientFlags struct {
	url, token, home string
	// urlFlag and homeFlag say where url and home came from (flag, environment, default).
	urlFlag, homeFlag *pflag.Flag
	// key is an attached agent's API key; commands that act as an agent use it instead of
	// the operator token.
	key  string
	json bool
	// quiet prints only the id of what a command created or changed, for scripts.
	quiet bool
	// noWait returns as soon as a long operation started instead of waiting for it.
	noWait bool
}

// defaultURL is the API a client calls when neither --url, JAM_URL nor a running jam dev's
// address file names one.
const defaultURL = "http://" + defaultListen

func addClientFlags(cmd *cobra.Command) *clientFlags {
	f := &clientFlags{}
	fs := cmd.PersistentFlags()
	// No flag default: the default depends on the data directory (see target).
	fs.StringVar(&f.url, "url", "", "Jam API base URL (default: the address jam dev wrote to $JAM_HOME/api-url, else "+defaultURL+")")
	bindEnv(fs, "url", "JAM_URL")
	fs.StringVar(&f.token, "token", "", "operator token (default: the token jam dev wrote to $JAM_HOME/api-token)")
	bindEnv(fs, "token", "JAM_TOKEN")
	addHomeFlag(fs, &f.home)
	f.urlFlag, f.homeFlag = fs.Lookup("url"), fs.Lookup("home")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of a table")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "print only ids: of what was created or changed, or of each listed item")
	fs.BoolVar(&f.noWait, "no-wait", false, "for long operations: print the started operation and return (follow it with jam operation wait ID)")
	bindEnv(fs, "no-wait", "JAM_NO_WAIT")
	return f
}

// addKeyFlag gives a command the --key flag (JAM_AGENT_KEY) to act as an attached agent.
func addKeyFlag(cmd *cobra.Command, f *clientFlags, usage string) {
	cmd.Flags().StringVar(&f.key, "key", "", usage)
	bindEnv(cmd.Flags(), "key", "JAM_AGENT_KEY")
}

// apiTarget is the API base URL a client calls and, for a connection error, where it came
// from.
type apiTarget struct {
	url string
	// hint follows "cannot reach the Jam API at URL: …" and says how URL was chosen.
	hint string
}

// target picks the API: --url or JAM_URL; else the address a running `jam dev` wrote to
// the data directory (--home or JAM_HOME), so a dev on another port (--listen
// 127.0.0.1:0) needs no JAM_URL; else the default.
func (f *clientFlags) target() (apiTarget, error) {
	if f.url != "" {
		switch from := flagOrigin(f.urlFlag); from {
		case "", "--url":
			return apiTarget{url: f.url, hint: f.url + " was given with --url"}, nil
		default:
			return apiTarget{url: f.url, hint: fmt.Sprintf("%s is %s's value (unset it to call the address jam dev wrote to %s)",
				f.url, from, f.layout().APIURLFile())}, nil
		}
	}
	file := f.layout().APIURLFile()
	b, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return apiTarget{url: defaultURL, hint: fmt.Sprintf("%s is the default: there is no %s, so no jam dev runs with the data directory %s (%s); start jam dev, point JAM_HOME at the directory it was started with, or set JAM_URL",
			defaultURL, file, f.home, f.homeOrigin())}, nil
	case err != nil:
		return apiTarget{}, fmt.Errorf("read the API address: %w", err)
	}
	raw := strings.TrimSpace(string(b))
	if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return apiTarget{}, fmt.Errorf("%s holds %q, not an http:// URL: delete it (jam dev writes it again at start) or set JAM_URL", file, raw)
	}
	return apiTarget{url: raw, hint: fmt.Sprintf("%s was read from %s, which jam dev writes when it starts and removes when it stops: if no jam dev runs with that data directory any more (one that was killed leaves the file), start it again or delete the file",
		raw, file)}, nil
}

func (f *clientFlags) layout() domain.Layout { return domain.Layout{Root: f.home} }

// homeOrigin says where the data directory came from.
func (f *clientFlags) homeOrigin() string {
	switch from := flagOrigin(f.homeFlag); from {
	case "":
		return "the default; JAM_HOME is not set"
	default:
		return "from " + from
	}
}

// operatorToken is --token or JAM_TOKEN, else the token file `jam dev` wrote to the data
// directory.
func (f *clientFlags) operatorToken() (string, error) {
	if f.token != "" {
		return f.token, nil
	}
	file := f.layout().APITokenFile()
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no operator token: there is no %s (data directory %s, %s). jam dev writes it at start: run the jam CLI with the JAM_HOME jam dev was started with, or set JAM_TOKEN (or --token)",
			file, f.home, f.homeOrigin())
	}
	if err != nil {
		return "", fmt.Errorf("read operator token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (f *clientFlags) client() (*client.Client, error) {
	t, err := f.target()
	if err != nil {
		return nil, err
	}
	token := f.key
	if token == "" {
		if token, err = f.operatorToken(); err != nil {
			return nil, err
		}
	}
	c := client.New(t.url, token)
	c.HTTP.Transport = explainUnreachable{base: http.DefaultTransport, hint: t.hint}
	return c, nil
}

// explainUnreachable adds to an error reaching the API (nothing listens, an unknown host)
// how the client chose that address.
type explainUnreachable struct {
	base http.RoundTripper
	hint string
}

func (e explainUnreachable) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := e.base.RoundTrip(r)
	var op *net.OpError
	if err != nil && errors.As(err, &op) && op.Op == "dial" {
		return nil, fmt.Errorf("%w\n  %s", err, e.hint)
	}
	return resp, err
}

// call sends one request with the client the flags describe and returns the raw 2xx body.
func (f *clientFlags) call(cmd *cobra.Command, method, path string, body any) ([]byte, error) {
	c, err := f.client()
	if err != nil {
		return nil, err
	}
	return c.DoRaw(cmd.Context(), method, path, body)
}

// operation starts a long operation (the route answers 202) and, unless --no-wait, waits
// for it with a progress line on stderr. It returns the operation's raw result, or
// done=false when it printed the started operation instead (--no-wait).
func (f *clientFlags) operation(cmd *cobra.Command, method, path string, body any) (raw []byte, done bool, err error) {
	c, err := f.client()
	if err != nil {
		return nil, false, err
	}
	started, err := c.DoRaw(cmd.Context(), method, path, body)
	if err != nil {
		return nil, false, err
	}
	var op api.OperationResource
	if err := json.Unmarshal(started, &op); err != nil {
		return nil, false, fmt.Errorf("decode operation: %w", err)
	}
	if f.noWait {
		return nil, false, printOperation(f, cmd, started, op)
	}
	op, err = c.WaitOperation(cmd.Context(), op, operationProgress(cmd))
	if err != nil {
		return nil, false, err
	}
	if op.Status == domain.OperationFailed {
		return nil, false, client.OperationError(op)
	}
	return op.Result, true, nil
}

// operationProgress prints one line per poll on stderr: the operation keeps running in
// the background if the user interrupts the wait.
func operationProgress(cmd *cobra.Command) func(api.OperationResource) {
	start := time.Now()
	return func(op api.OperationResource) {
		stage := cmp.Or(op.Stage, "running")
		fmt.Fprintf(cmd.ErrOrStderr(), "operation %s (%s): %s, %s\n", op.ID, op.Kind, stage, time.Since(start).Round(time.Second))
	}
}

// printOperation shows an operation resource (raw under --json, its id under --quiet).
func printOperation(f *clientFlags, cmd *cobra.Command, raw []byte, op api.OperationResource) error {
	if f.json {
		return printJSON(cmd.OutOrStdout(), raw)
	}
	w := cmd.OutOrStdout()
	if f.quiet {
		_, err := fmt.Fprintln(w, op.ID)
		return err
	}
	fmt.Fprintf(w, "operation %s: %s %s %s, %s\n", op.ID, op.Kind, op.Target.Kind, op.Target.ID, op.Status)
	if op.Stage != "" {
		fmt.Fprintf(w, "stage: %s\n", op.Stage)
	}
	if op.Failure != nil {
		fmt.Fprintf(w, "failed: %s (%s)\n", op.Failure.Message, op.Failure.Class)
	}
	if op.WorkflowURL != "" {
		fmt.Fprintf(w, "workflow: %s\n", op.WorkflowURL)
	}
	if op.Status == domain.OperationRunning {
		fmt.Fprintf(w, "follow it: jam operation wait %s\n", op.ID)
	}
	return nil
}

// render prints raw as JSON under --json, else decodes it into T for the human view.
func render[T any](f *clientFlags, cmd *cobra.Command, raw []byte, human func(T) error) error {
	if f.json {
		return printJSON(cmd.OutOrStdout(), raw)
	}
	if f.quiet {
		var id struct {
			ID  string `json:"id"`
			RID string `json:"runtime_session_id"`
		}
		if err := json.Unmarshal(raw, &id); err == nil && (id.ID != "" || id.RID != "") {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), cmp.Or(id.ID, id.RID))
			return err
		}
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return human(v)
}

// listCmd is a command that GETs a list and prints it as a table (or JSON with --json).
func listCmd[T any](cf *clientFlags, use, short string, args cobra.PositionalArgs, path func([]string) string,
	header string, rows func(T) [][]string) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: args,
		RunE: func(cmd *cobra.Command, a []string) error {
			raw, err := cf.call(cmd, http.MethodGet, path(a), nil)
			if err != nil {
				return err
			}
			if cf.quiet && !cf.json {
				// The first column (the id) of each row, one per line, for scripts:
				// TEMPLATE=$(jam template list $AGENT -q | head -1).
				var out T
				if err := json.Unmarshal(raw, &out); err != nil {
					return fmt.Errorf("decode response: %w", err)
				}
				for _, row := range rows(out) {
					if len(row) > 0 {
						fmt.Fprintln(cmd.OutOrStdout(), row[0])
					}
				}
				return nil
			}
			return render(cf, cmd, raw, func(out T) error { return table(cmd.OutOrStdout(), header, rows(out)) })
		},
	}
}

// fixed is a path that takes no arguments.
func fixed(path string) func([]string) string { return func([]string) string { return path } }

// printJSON pretty-prints a raw API response.
func printJSON(w io.Writer, raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func table(w io.Writer, header string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func ago(seconds float64) string {
	return (time.Duration(seconds * float64(time.Second))).Round(time.Second).String() + " ago"
}

// filterQuery is the query of a filtered list: each non-empty filter, and the limit when set.
func filterQuery(filters map[string]string, limit int) string {
	q := url.Values{}
	for k, v := range filters {
		if v != "" {
			q.Set(k, v)
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q.Encode()
}
