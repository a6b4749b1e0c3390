package test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/gobuild"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
)

var stubmodelProgram = &gobuild.Program{Pkg: "./cmd/jam-stubmodel", Name: "jam-stubmodel"}

// readmeStubAddr is the scripted model server's address as the docs write it; the test
// serves it on a free port and runs the commands with that one instead.
const readmeStubAddr = "127.0.0.1:7790"

// readmeFiles hold the blocks the test runs: the README's five-command demo, and the agent
// CLIs' set-up and sections in docs/providers.md.
var readmeFiles = []string{"README.md", filepath.Join("docs", "providers.md")}

// readmeBlocks are the shell blocks marked `<!-- readme-test: NAME -->` in readmeFiles, by
// name, with the indentation of a block inside a list item removed. A name is marked once.
func readmeBlocks(t *testing.T) map[string]string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	blocks := map[string]string{}
	for _, doc := range readmeFiles {
		raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		for name, body := range markedBlocks(t, doc, string(raw)) {
			if _, dup := blocks[name]; dup {
				t.Fatalf("%s: the readme-test block %q is marked in two files", doc, name)
			}
			blocks[name] = body
		}
	}
	return blocks
}

// markedBlocks are one document's readme-test blocks.
func markedBlocks(t *testing.T, doc, raw string) map[string]string {
	t.Helper()
	marker := regexp.MustCompile(`^\s*<!-- readme-test: ([a-z]+) -->\s*$`)
	blocks := map[string]string{}
	lines := strings.Split(raw, "\n")
	for i := 0; i < len(lines); i++ {
		m := marker.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
			t.Fatalf("%s:%d: the readme-test marker %q is not followed by a ```sh block", doc, i+1, m[1])
		}
		indent := lines[i+1][:strings.Index(lines[i+1], "```")]
		var body []string
		for i += 2; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		blocks[m[1]] = strings.Join(body, "\n") + "\n"
	}
	return blocks
}

// Every block the verbatim test runs is marked where a reader looks for it: the demo in the
// README, the agent CLIs' set-up and sections in docs/providers.md. It needs no agent CLI, so
// a doc move that drops a marker fails even where the verbatim test skips.
func TestReadmeBlocksAreMarkedWhereTheDocsPutThem(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	want := map[string][]string{"README.md": {"demo"}, readmeFiles[1]: {"setup", "codex", "claude", "copilot"}}
	for doc, names := range want {
		raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		blocks := markedBlocks(t, doc, string(raw))
		for _, name := range names {
			if strings.TrimSpace(blocks[name]) == "" {
				t.Errorf("%s has no readme-test block %q", doc, name)
			}
		}
	}
	if env := readmeDevEnv(t, readmeBlocks(t)["setup"]); len(env) == 0 {
		t.Error("the set-up block starts `make dev` with no environment for the agent CLIs' templates")
	}
}

// readmeDevEnv is the environment the set-up block (docs/providers.md) starts `make dev` with.
func readmeDevEnv(t *testing.T, setup string) []string {
	t.Helper()
	for _, line := range strings.Split(setup, "\n") {
		fields := strings.Fields(line)
		for i := 0; i+1 < len(fields); i++ {
			if fields[i] == "make" && fields[i+1] == "dev" {
				return fields[:i]
			}
		}
	}
	t.Fatalf("the readme-test set-up block starts no `make dev`:\n%s", setup)
	return nil
}

// startStubmodel runs the real bin/jam-stubmodel on a free port and returns its address.
func startStubmodel(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(stubmodelProgram.Binary(t), "--listen", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		for sc.Scan() {
		}
	}()
	select {
	case line := <-first:
		addr := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "http://"), "/v1")
		if !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Fatalf("jam-stubmodel's first line %q is not its address", line)
		}
		return addr
	case <-time.After(30 * time.Second):
		t.Fatal("jam-stubmodel printed no address within 30 s")
	}
	return ""
}

// The README's demo and docs/providers.md's sections, run verbatim (the model server on a
// free port instead of 7790) on a fresh `jam dev` started as the set-up block says: the
// README's five-command demo, then
// Codex, Claude Code and Copilot each in a room of its own, answering with the scripted
// model server's reply (not the test agent's echo), and the demo's room switched to each in
// turn, answering from a new thread of each, with the switch said in the room.
func TestReadmeProviderSectionsRunVerbatim(t *testing.T) {
	t.Parallel()
	for _, cli := range []string{"codex", "claude", "copilot"} {
		realagent.Require(t, cli)
	}
	blocks := readmeBlocks(t)
	for _, name := range []string{"setup", "demo", "codex", "claude", "copilot"} {
		if blocks[name] == "" {
			t.Fatalf("no readme-test block %q in %s", name, strings.Join(readmeFiles, " or "))
		}
	}
	t.Cleanup(stubmodelProgram.Cleanup)
	addr := startStubmodel(t)
	env := readmeDevEnv(t, strings.ReplaceAll(blocks["setup"], readmeStubAddr, addr))
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), env...))

	// The commands run from a checkout-shaped directory: bin/ holds what `make build` makes.
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	must(t, os.Mkdir(bin, 0o755))
	for name, target := range map[string]string{"jam": jamBinary, "jam-testagent": testagent.Binary(t),
		"jam-stubmodel": stubmodelProgram.Binary(t)} {
		must(t, os.Symlink(target, filepath.Join(bin, name)))
	}
	var script strings.Builder
	for _, name := range []string{"demo", "codex", "claude", "copilot"} {
		fmt.Fprintf(&script, "echo '>>> %s'\n%s", name, strings.ReplaceAll(blocks[name], readmeStubAddr, addr))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script.String())
	// JAM_HOME only: the CLI finds this jam dev's address and token there.
	sh.Dir, sh.Env = root, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "JAM_HOME=" + home}
	out, err := sh.CombinedOutput()
	t.Logf("the documented commands:\n%s", out)
	if err != nil {
		t.Fatalf("the documented commands failed: %v", err)
	}

	c := d.client
	var rooms api.RoomList
	must(t, c.Do(context.Background(), http.MethodGet, "/v1/rooms", nil, &rooms))
	byName := map[string]api.RoomBody{}
	for _, r := range rooms.Items {
		byName[r.Name] = r
	}
	for _, name := range []string{"codex-lab", "claude-lab", "copilot-lab"} {
		replies := agentTexts(t, c, byName[name])
		if len(replies) != 1 || replies[0] != "stub: hello" {
			t.Fatalf("room %s: agent replies %q, want the model server's one answer", name, replies)
		}
	}
	demo := byName["lab"]
	want := []string{"echo: hello", "stub: hello, Codex", "stub: hello, Claude", "stub: hello, Copilot"}
	if got := agentTexts(t, c, demo); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the demo's room answered %q, want %q", got, want)
	}
	// Each switch started a new thread and told the room.
	var switches []string
	for _, e := range roomEvents(t, c, demo.ID) {
		if e.Kind == domain.EventThreadReplaced {
			switches = append(switches, string(e.Payload))
		}
	}
	if len(switches) != 3 {
		t.Fatalf("thread replacements in the demo's room: %q, want one per switch", switches)
	}
	for i, kind := range []string{"codex-app-server:codex", "claude-code-cli:claude", "copilot-sdk:copilot"} {
		if !strings.Contains(switches[i], "now runs "+kind) {
			t.Fatalf("switch %d said %s, want the room told it now runs %s", i+1, switches[i], kind)
		}
	}
}

// agentTexts are the texts of the room's messages written by agents, in order.
func agentTexts(t *testing.T, c *client.Client, room api.RoomBody) []string {
	t.Helper()
	if room.ID == [16]byte{} {
		t.Fatal("no such room")
	}
	var page api.MessageList
	must(t, c.Do(context.Background(), http.MethodGet, "/v1/rooms/"+room.ID.String()+"/messages?limit=500", nil, &page))
	var out []string
	for _, m := range page.Items {
		if m.AuthorKind == domain.ParticipantAgent {
			out = append(out, m.Text)
		}
	}
	return out
}
