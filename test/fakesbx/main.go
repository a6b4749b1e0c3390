// Command fakesbx implements the subset of the Docker Sandboxes CLI (`sbx`) that Jam's driver
// uses, over a state directory, so tests run the REAL driver: version, ls [--json], create,
// exec [-i] [-e K=V]... [--env-file F]... [-w DIR] NAME CMD..., stop, rm [-f]. A sandbox is a
// directory; exec runs the command as a real child process with HOME at the sandbox's home.
//
// Environment: FAKESBX_STATE (required) is the state directory; FAKESBX_VERSION the reported
// release (default 0.38.0); FAKESBX_FAIL a comma list of failures to inject: daemon (every
// command but version fails as if the daemon were down), create, rm, noise (ls prints a notice
// line before its JSON), bare (ls prints a bare array, as old releases did);
// FAKESBX_SLOW_CREATE seconds create sleeps before it finishes.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type sandbox struct {
	Name       string    `json:"name"`
	ID         string    `json:"id"`
	Agent      string    `json:"agent"`
	Status     string    `json:"status"`
	Workspaces []string  `json:"workspaces"`
	CreatedAt  time.Time `json:"created_at"`
	LastUsedAt time.Time `json:"last_used_at"`
}

func main() {
	state := os.Getenv("FAKESBX_STATE")
	if state == "" {
		fail(2, "FAKESBX_STATE is not set")
	}
	args := os.Args[1:]
	if len(args) == 0 {
		fail(2, "usage: sbx COMMAND")
	}
	if args[0] != "version" && injected("daemon") {
		fail(1, "ERROR: cannot connect to the Docker Sandboxes daemon: connection refused")
	}
	s := store{dir: filepath.Join(state, "sandboxes")}
	switch args[0] {
	case "version":
		v := os.Getenv("FAKESBX_VERSION")
		if v == "" {
			v = "0.38.0"
		}
		fmt.Printf("sbx version v%s (fake)\n", v)
	case "ls", "list":
		s.ls(slices.Contains(args[1:], "--json"))
	case "create":
		s.create(args[1:])
	case "exec":
		s.exec(args[1:])
	case "stop":
		for _, n := range args[1:] {
			sb := s.load(n)
			sb.Status = "stopped"
			s.save(sb)
		}
	case "rm", "remove", "delete":
		if injected("rm") {
			fail(1, "ERROR: injected rm failure")
		}
		for _, n := range args[1:] {
			if n == "-f" || n == "--force" {
				continue
			}
			s.load(n)
			if err := os.RemoveAll(filepath.Join(s.dir, n)); err != nil {
				fail(1, err.Error())
			}
		}
	default:
		fail(2, "unknown command "+args[0])
	}
}

func injected(what string) bool {
	return slices.Contains(strings.Split(os.Getenv("FAKESBX_FAIL"), ","), what)
}

func fail(code int, msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(code)
}

type store struct{ dir string }

func (s store) load(name string) sandbox {
	b, err := os.ReadFile(filepath.Join(s.dir, name, "sandbox.json"))
	if err != nil {
		fail(1, "ERROR: sandbox "+name+" not found")
	}
	var sb sandbox
	if err := json.Unmarshal(b, &sb); err != nil {
		fail(1, err.Error())
	}
	return sb
}

func (s store) save(sb sandbox) {
	b, _ := json.Marshal(sb)
	if err := os.WriteFile(filepath.Join(s.dir, sb.Name, "sandbox.json"), b, 0o600); err != nil {
		fail(1, err.Error())
	}
}

func (s store) ls(asJSON bool) {
	entries, _ := os.ReadDir(s.dir)
	list := []sandbox{}
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(s.dir, e.Name(), "sandbox.json")); err == nil {
			list = append(list, s.load(e.Name()))
		}
	}
	if !asJSON {
		fmt.Println("SANDBOX  AGENT  STATUS  PORTS  WORKSPACE")
		for _, sb := range list {
			fmt.Printf("%s  %s  %s  -  %s\n", sb.Name, sb.Agent, sb.Status, strings.Join(sb.Workspaces, ","))
		}
		return
	}
	if injected("noise") {
		fmt.Println("A new version of sbx is available.")
	}
	var out any = map[string]any{"sandboxes": list}
	if injected("bare") {
		out = list
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func (s store) create(args []string) {
	var name, agent string
	var paths []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "--name":
			i++
			name = args[i]
		case "--kit", "-t", "--template", "--cpus", "-m", "--memory", "-e", "--env", "--env-file":
			i++
		case "--clone", "-q", "--quiet":
		default:
			if agent == "" {
				agent = a
			} else {
				paths = append(paths, strings.TrimSuffix(a, ":ro"))
			}
		}
	}
	if name == "" || agent == "" {
		fail(2, "usage: sbx create --name NAME AGENT [PATH...]")
	}
	if injected("create") {
		fail(1, "ERROR: injected create failure")
	}
	if secs, _ := strconv.Atoi(os.Getenv("FAKESBX_SLOW_CREATE")); secs > 0 {
		time.Sleep(time.Duration(secs) * time.Second)
	}
	if _, err := os.Stat(filepath.Join(s.dir, name)); err == nil {
		fail(1, "ERROR: sandbox "+name+" already exists")
	}
	if err := os.MkdirAll(filepath.Join(s.dir, name, "home"), 0o700); err != nil {
		fail(1, err.Error())
	}
	now := time.Now().UTC()
	s.save(sandbox{Name: name, ID: "fake-" + name, Agent: agent, Status: "running", Workspaces: paths, CreatedAt: now, LastUsedAt: now})
	fmt.Println(name)
}

func (s store) exec(args []string) {
	var env []string
	dir := ""
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		switch args[i] {
		case "-i", "-t", "-d", "--privileged":
		case "-e", "--env":
			i++
			env = append(env, args[i])
		case "--env-file":
			i++
			env = append(env, readEnvFile(args[i])...)
		case "-w", "--workdir":
			i++
			dir = args[i]
		case "-u", "--user":
			i++
		default:
			fail(2, "unknown exec flag "+args[i])
		}
	}
	if len(args)-i < 2 {
		fail(2, "usage: sbx exec [flags] SANDBOX COMMAND [ARG...]")
	}
	sb := s.load(args[i])
	if sb.Status != "running" { // exec starts a stopped sandbox first
		sb.Status = "running"
	}
	sb.LastUsedAt = time.Now().UTC()
	s.save(sb)
	home := filepath.Join(s.dir, sb.Name, "home")
	cmd := exec.Command(args[i+1], args[i+2:]...)
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, env...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		fail(126, err.Error())
	}
}

func readEnvFile(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		fail(1, "ERROR: env file: "+err.Error())
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}
