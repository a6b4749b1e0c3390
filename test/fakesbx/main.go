// Command fakesbx implements the subset of the Docker Sandboxes CLI (`sbx`) that Jam's driver
// uses, over a state directory, so tests run the REAL driver: version, ls [--json], create,
// exec [-i] [-e K=V]... [--env-file F]... [-w DIR] NAME CMD..., stop, rm [-f], policy
// (allow|rm|check|ls network; ls filters by --sandbox, showing global rules too), secret ls.
// A sandbox is a directory; exec runs the command as a real child process with HOME at the
// sandbox's home and only the -e / --env-file values (no ambient environment but PATH), and
// stop / rm kill what runs in the sandbox, as a microVM's stop would. Policy rule ids are
// never reused.
//
// Environment: FAKESBX_STATE (required) is the state directory; FAKESBX_VERSION the reported
// release (default 0.38.0); FAKESBX_FAIL a comma list of failures to inject: daemon (every
// command but version fails as if the daemon were down), create, rm, noise (ls prints a notice
// line before its JSON), bare (ls prints a bare array, as old releases did), nonce (every exec
// first overwrites the guest's owner marker with a nonce Jam did not write, as a tampering
// guest would), stop (stop fails), allowcrash (policy allow adds its rules, then exits 137
// before answering, as a worker killed between the add and its journal write would see);
// FAKESBX_ALLOWCRASH_ONCE a comma list of targets whose first allow crashes that way;
// FAKESBX_GOVERNANCE_DENY a comma list of targets the organisation's governance forbids
// (check reports "governance":"denied" and says so on stderr, allow refuses with exit 3);
// FAKESBX_SLOW_CREATE seconds create sleeps before it finishes; FAKESBX_HANG_AFTER_CREATE
// seconds it waits after the sandbox exists before it reports success (the window in which a
// killed worker leaves a sandbox without its marker). FAKESBX_LOG, when set, is a file every
// invocation's arguments are appended to (a line each), so tests can prove what was and was
// not run. FAKESBX_STORED_SERVICES is the `secret ls` table: a comma list of SCOPE:SERVICE
// (scope "global" or a sandbox name; its name is not secret-like, so Jam's sbx client
// environment passes it); secret values are never stored. FAKESBX_SERVICE_ENV
// (SERVICE=VAR, comma separated) names the variable a stored service secret sets, to a
// placeholder, in every exec of a sandbox it applies to.
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
	if log := os.Getenv("FAKESBX_LOG"); log != "" {
		if f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			fmt.Fprintln(f, strings.Join(args, " "))
			f.Close()
		}
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
		if injected("stop") {
			fail(1, "ERROR: injected stop failure")
		}
		for _, n := range args[1:] {
			sb := s.load(n)
			s.killProcs(n)
			sb.Status = "stopped"
			s.save(sb)
		}
	case "policy":
		s.policy(args[1:])
	case "secret":
		secret(args[1:])
	case "rm", "remove", "delete":
		if injected("rm") {
			fail(1, "ERROR: injected rm failure")
		}
		for _, n := range args[1:] {
			if n == "-f" || n == "--force" {
				continue
			}
			s.load(n)
			s.killProcs(n)
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
	if err := writeAtomic(filepath.Join(s.dir, sb.Name, "sandbox.json"), b); err != nil {
		fail(1, err.Error())
	}
}

// writeAtomic replaces path whole (temporary file, then rename), so a concurrent `sbx ls`
// never reads a half-written record, as Docker's own state never shows one.
func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func (s store) ls(asJSON bool) {
	entries, _ := os.ReadDir(s.dir)
	list := []sandbox{}
	for _, e := range entries {
		// A sandbox removed while we list is simply not listed.
		b, err := os.ReadFile(filepath.Join(s.dir, e.Name(), "sandbox.json"))
		if err != nil {
			continue
		}
		var sb sandbox
		if err := json.Unmarshal(b, &sb); err != nil {
			fail(1, err.Error())
		}
		list = append(list, sb)
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
	if secs, _ := strconv.Atoi(os.Getenv("FAKESBX_HANG_AFTER_CREATE")); secs > 0 {
		time.Sleep(time.Duration(secs) * time.Second) // made, but not yet reported: a crash window
	}
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
	if injected("nonce") {
		marker := filepath.Join(home, ".jam-sandbox-owner.json")
		if _, err := os.Stat(marker); err == nil {
			_ = os.WriteFile(marker, []byte(`{"name":"`+sb.Name+`","nonce":"not-jams"}`), 0o600)
		}
	}
	procs := filepath.Join(s.dir, sb.Name, "procs")
	_ = os.MkdirAll(procs, 0o700)
	pidFile := filepath.Join(procs, strconv.Itoa(os.Getpid()))
	_ = os.WriteFile(pidFile, nil, 0o600)
	defer os.Remove(pidFile)
	cmd := exec.Command(args[i+1], args[i+2:]...)
	cmd.Env = append(append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, serviceEnv(sb.Name)...), env...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	_ = os.Remove(pidFile)
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		fail(126, err.Error())
	}
}

// killProcs ends every exec running in the sandbox; each exec's child dies with it
// (Pdeathsig), as processes die with a stopped microVM.
func (s store) killProcs(name string) {
	entries, _ := os.ReadDir(filepath.Join(s.dir, name, "procs"))
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = os.Remove(filepath.Join(s.dir, name, "procs", e.Name()))
	}
}

// policy keeps network rules (per sandbox, or global) in policy.json: allow adds a rule with
// an id never used before (a counter in policy.seq), rm removes by id or resource, check
// answers allowed/denied (and governance), ls lists the sandbox's rules and the global ones.
// One lock file serializes every policy command, as Docker's daemon does.
func (s store) policy(args []string) {
	if len(args) < 1 {
		fail(2, "usage: sbx policy allow|rm|check|ls ...")
	}
	type rule struct {
		ID       string `json:"id"`
		Scope    string `json:"scope"`
		Resource string `json:"resource"`
	}
	state := filepath.Dir(s.dir)
	if lock, err := os.OpenFile(filepath.Join(state, "policy.lock"), os.O_CREATE|os.O_RDWR, 0o600); err == nil {
		_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX)
		defer lock.Close()
	}
	path := filepath.Join(state, "policy.json")
	var rules []rule
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &rules)
	}
	verb, rest := args[0], args[1:]
	if len(rest) > 0 && rest[0] == "network" {
		rest = rest[1:]
	}
	scope, id, resource, asJSON, scoped := "global", "", "", false, false
	var positional []string
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case "--sandbox":
			i++
			scope, scoped = rest[i], true
		case "--id":
			i++
			id = rest[i]
		case "--resource":
			i++
			resource = rest[i]
		case "--json":
			asJSON = true
		case "-g", "--global":
		default:
			positional = append(positional, rest[i])
		}
	}
	save := func() {
		b, _ := json.Marshal(rules)
		if err := writeAtomic(path, b); err != nil {
			fail(1, err.Error())
		}
	}
	switch verb {
	case "allow":
		for _, res := range positional {
			for _, r := range strings.Split(res, ",") {
				if governed(r) {
					fail(3, "ERROR: the organisation's governance policy denies network access to "+r)
				}
			}
		}
		seqPath := filepath.Join(state, "policy.seq")
		seq := 0
		if b, err := os.ReadFile(seqPath); err == nil {
			seq, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		var added []string
		for _, res := range positional {
			for _, r := range strings.Split(res, ",") {
				seq++
				rules = append(rules, rule{ID: fmt.Sprintf("rule-%d", seq), Scope: scope, Resource: r})
				added = append(added, r)
			}
		}
		if err := writeAtomic(seqPath, []byte(strconv.Itoa(seq))); err != nil {
			fail(1, err.Error())
		}
		save()
		for _, r := range added {
			if injected("allowcrash") || crashOnce(state, r) {
				// The rule exists, but whoever asked never hears so: a killed worker.
				os.Exit(137)
			}
		}
	case "rm":
		kept := rules[:0]
		for _, r := range rules {
			if (id != "" && r.ID == id) || (resource != "" && r.Resource == resource && r.Scope == scope) {
				continue
			}
			kept = append(kept, r)
		}
		rules = kept
		save()
	case "check":
		if len(positional) != 1 {
			fail(2, "usage: sbx policy check network [--sandbox S] [--json] TARGET")
		}
		target := positional[0]
		allowed, governance := false, ""
		for _, r := range rules {
			if r.Resource == target && (r.Scope == "global" || r.Scope == scope) {
				allowed = true
			}
		}
		if governed(target) {
			allowed, governance = false, "denied"
			fmt.Fprintln(os.Stderr, "the organisation's governance policy denies network access to "+target)
		}
		if asJSON {
			out := map[string]any{"target": target, "allowed": allowed}
			if governance != "" {
				out["governance"] = governance
			}
			b, _ := json.Marshal(out)
			fmt.Println(string(b))
		} else if allowed {
			fmt.Println("allowed")
		} else {
			fmt.Println("denied")
		}
	case "ls":
		shown := []rule{}
		for _, r := range rules {
			if !scoped || r.Scope == "global" || r.Scope == scope {
				shown = append(shown, r)
			}
		}
		b, _ := json.Marshal(map[string]any{"rules": shown})
		fmt.Println(string(b))
	default:
		fail(2, "unknown policy command "+verb)
	}
}

// governed reports whether FAKESBX_GOVERNANCE_DENY lists target.
func governed(target string) bool {
	return slices.Contains(strings.Split(os.Getenv("FAKESBX_GOVERNANCE_DENY"), ","), target)
}

// crashOnce reports whether FAKESBX_ALLOWCRASH_ONCE lists target and its allow has not
// crashed yet (remembered in the state directory, so the retry succeeds).
func crashOnce(state, target string) bool {
	if !slices.Contains(strings.Split(os.Getenv("FAKESBX_ALLOWCRASH_ONCE"), ","), target) {
		return false
	}
	done := filepath.Join(state, "allowcrash-"+strings.ReplaceAll(target, ":", "_"))
	if _, err := os.Stat(done); err == nil {
		return false
	}
	_ = os.WriteFile(done, nil, 0o600)
	return true
}

// secret answers `secret ls [SANDBOX] [-g] [--service S]` from FAKESBX_STORED_SERVICES as the real
// CLI does: a table of scope and service, never a value.
func secret(args []string) {
	if len(args) == 0 || args[0] != "ls" {
		fail(2, "usage: sbx secret ls [SANDBOX] [-g] [--service S]")
	}
	scope, service := "", ""
	for i := 1; i < len(args); i++ {
		switch args[i] {
		case "-g", "--global":
			scope = "global"
		case "--service":
			i++
			service = args[i]
		default:
			scope = args[i]
		}
	}
	fmt.Println("SCOPE  SERVICE  SECRET")
	for _, entry := range strings.Split(os.Getenv("FAKESBX_STORED_SERVICES"), ",") {
		sc, svc, ok := strings.Cut(entry, ":")
		if !ok || (scope != "" && sc != scope) || (service != "" && svc != service) {
			continue
		}
		fmt.Printf("%s  %s  ********\n", sc, svc)
	}
}

// serviceEnv is what a sandbox's stored service secrets put in a guest's environment:
// FAKESBX_SERVICE_ENV maps a service to the variable its agent reads (SERVICE=VAR, comma
// separated), set for each FAKESBX_STORED_SERVICES entry of the sandbox or global scope to a
// placeholder, as the real sandbox's proxy holds the credential itself.
func serviceEnv(name string) []string {
	vars := map[string]string{}
	for _, kv := range strings.Split(os.Getenv("FAKESBX_SERVICE_ENV"), ",") {
		if svc, v, ok := strings.Cut(kv, "="); ok {
			vars[svc] = v
		}
	}
	var out []string
	for _, entry := range strings.Split(os.Getenv("FAKESBX_STORED_SERVICES"), ",") {
		sc, svc, ok := strings.Cut(entry, ":")
		if v := vars[svc]; ok && v != "" && (sc == "global" || sc == name) {
			out = append(out, v+"=sbx-proxy-managed")
		}
	}
	return out
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
