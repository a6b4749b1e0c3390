package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/jam-dev/jam/internal/domain"
)

// clearClientEnv leaves the client's environment variables unset for one test.
func clearClientEnv(t *testing.T) {
	t.Helper()
	for _, env := range []string{"JAM_URL", "JAM_TOKEN", "JAM_HOME", "JAM_AGENT_KEY"} {
		t.Setenv(env, "") // restored after the test
		os.Unsetenv(env)
	}
}

// targetOf parses args (and the environment) as a client command does and returns the API
// it would call.
func targetOf(t *testing.T, args ...string) (apiTarget, error) {
	t.Helper()
	cmd := &cobra.Command{Use: "x", SilenceUsage: true, SilenceErrors: true}
	cf := addClientFlags(cmd)
	var got apiTarget
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		if err := applyEnv(c); err != nil {
			return err
		}
		var err error
		got, err = cf.target()
		return err
	}
	cmd.SetArgs(args)
	err := cmd.Execute()
	return got, err
}

// The CLI calls --url, else JAM_URL, else the address a running jam dev wrote to the data
// directory, else the default; each choice says where it came from.
func TestClientURLPrecedence(t *testing.T) {
	clearClientEnv(t)
	home := t.TempDir()
	t.Setenv("JAM_HOME", home)
	file := domain.Layout{Root: home}.APIURLFile()

	got, err := targetOf(t)
	if err != nil || got.url != defaultURL || !strings.Contains(got.hint, "is the default") ||
		!strings.Contains(got.hint, file) || !strings.Contains(got.hint, "from JAM_HOME") {
		t.Fatalf("no file: %+v %v", got, err)
	}

	if err := os.WriteFile(file, []byte("http://127.0.0.1:41234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = targetOf(t)
	if err != nil || got.url != "http://127.0.0.1:41234" || !strings.Contains(got.hint, "was read from "+file) {
		t.Fatalf("file: %+v %v", got, err)
	}
	// --home names another directory: its file (none) decides.
	other := t.TempDir()
	got, err = targetOf(t, "--home", other)
	if err != nil || got.url != defaultURL || !strings.Contains(got.hint, "from --home") {
		t.Fatalf("--home: %+v %v", got, err)
	}

	t.Setenv("JAM_URL", "http://127.0.0.1:1111")
	got, err = targetOf(t)
	if err != nil || got.url != "http://127.0.0.1:1111" || !strings.Contains(got.hint, "JAM_URL") {
		t.Fatalf("JAM_URL: %+v %v", got, err)
	}

	got, err = targetOf(t, "--url", "http://127.0.0.1:2222")
	if err != nil || got.url != "http://127.0.0.1:2222" || !strings.Contains(got.hint, "--url") {
		t.Fatalf("--url: %+v %v", got, err)
	}

	os.Unsetenv("JAM_URL")
	if err := os.WriteFile(file, []byte("127.0.0.1:41234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := targetOf(t); err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("a file without a URL: %v", err)
	}
}

// A jam dev that is gone leaves the CLI with an error naming the address it tried and the
// file it read it from; with no token the error names the token file and the data directory.
func TestClientErrorsSayWhatWasTried(t *testing.T) {
	clearClientEnv(t)
	home := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	file := domain.Layout{Root: home}.APIURLFile()
	if err := os.WriteFile(file, []byte(dead+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = runCLIErr(t, "room", "list", "--home", home, "--token", "tok")
	if err == nil || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), "was read from "+file) {
		t.Fatalf("unreachable: %v", err)
	}

	_, err = runCLIErr(t, "room", "list", "--home", home)
	tokenFile := filepath.Join(home, "api-token")
	if err == nil || !strings.Contains(err.Error(), tokenFile) || !strings.Contains(err.Error(), "from --home") ||
		!strings.Contains(err.Error(), "JAM_HOME jam dev was started with") {
		t.Fatalf("no token: %v", err)
	}
}

// The --url flag's help says what the default really is.
func TestURLFlagHelpNamesTheAddressFile(t *testing.T) {
	cmd := &cobra.Command{Use: "x"}
	addClientFlags(cmd)
	usage := cmd.PersistentFlags().FlagUsages()
	if !strings.Contains(usage, "$JAM_HOME/api-url, else "+defaultURL) || strings.Contains(usage, `(default "http`) {
		t.Fatalf("usage:\n%s", usage)
	}
}
