package provider

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/procgroup"
)

// ExecutableSource says where a resolved executable came from.
type ExecutableSource string

// Sources in the order ResolveExecutable consults them.
const (
	SourceExplicit    ExecutableSource = "explicit"
	SourceEnvironment ExecutableSource = "environment"
	SourcePin         ExecutableSource = "pin"
	SourcePath        ExecutableSource = "path"
)

const (
	// A Node or Bun CLI's first --version on a busy two-core machine can take several
	// seconds; a probe that times out refuses the provider until an operator retries, so
	// the bound is generous.
	defaultProbeTimeout = 20 * time.Second
	// probeOutputLimit bounds what a version probe may make us hold in memory.
	probeOutputLimit = 4 << 10
	// refusalQuoteLimit keeps a refusal message readable when a candidate is chatty.
	refusalQuoteLimit = 200
	// probeWaitDelay bounds how long a probe's pipes may be held open by a stray grandchild.
	probeWaitDelay = time.Second
)

var (
	// ErrExecutableRefused: no acceptable executable was found; the error is a
	// *ResolutionRefusal naming every candidate.
	ErrExecutableRefused = errors.New("executable refused")
	// ErrInvalidCommand: the catalog command is not a bare command name, so it cannot be
	// looked up in the pin table or on PATH.
	ErrInvalidCommand = errors.New("invalid command name")
)

// versionPattern finds the first dotted version number in a probe's output.
var versionPattern = regexp.MustCompile(`\d+(?:\.\d+){1,3}`)

// ExecutableRequest is everything ResolveExecutable consults, in order: Explicit, the
// environment default, the pin table, then PATH.
type ExecutableRequest struct {
	// Command is the catalog command name, e.g. "opencode".
	Command string
	// Explicit is the template's command when it is a path; it is verified, never replaced.
	Explicit string
	// EnvVar names the environment default; "" uses EnvVarFor(Command).
	EnvVar string
	// Env looks up the environment default in the worker's environment snapshot (the
	// startup code reads the process's once); nil has no environment default.
	Env func(string) string
	// Pins is the machine pin table: command name -> absolute path.
	Pins map[string]string
	// PATH is the list to search (the terminal's PATH); "" searches nothing.
	PATH string
	// VersionArgs is the probe's argv after the path; nil means {"--version"}.
	VersionArgs []string
	// ProbeTimeout bounds each version probe; 0 means 20s.
	ProbeTimeout time.Duration
	// ProbeEnv is the environment a version probe runs with (the one the provider would
	// get); nil is an empty one, never the worker's. PATH is set to the searched PATH
	// either way.
	ProbeEnv []string
	// Groups, when set, records each probe's process group while it runs, so a worker
	// killed mid-probe leaves its reaper (the process guard, the next start) a record: a
	// CLI's first run may start children that unpack for a while (Copilot's runtime),
	// beyond the reach of the probe's Pdeathsig.
	Groups GroupRecorder
}

// GroupRecorder persists the process groups a worker starts (procgroup.Recorder).
type GroupRecorder interface {
	Add(pid int, runtimeSession string) (procgroup.Record, error)
	Remove(rec procgroup.Record) error
}

// ResolvedExecutable is the executable to run. Path is always absolute.
type ResolvedExecutable struct {
	Path    string
	Version string
	Source  ExecutableSource
}

// Candidate is one executable considered and, in a refusal, why it was refused.
type Candidate struct {
	Path    string
	Source  ExecutableSource
	Version string
	// Output is the probe's combined output, trimmed and bounded.
	Output string
	// Reason says why the candidate was refused; "" when it was acceptable.
	Reason string
}

// ResolutionRefusal is the typed refusal: no candidate was acceptable. Callers must not
// fall back to spawning the bare command name. Its message names where the command was
// looked for, why each candidate was refused, and what fixes it.
type ResolutionRefusal struct {
	Command    string
	Candidates []Candidate
	// Searched counts the distinct absolute PATH directories searched; it matters only
	// when there were no candidates at all.
	Searched int
	// EnvVar is the environment default consulted (JAM_<COMMAND>_BIN); "" is EnvVarFor(Command).
	EnvVar string
}

func (r *ResolutionRefusal) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "executable %q refused: ", r.Command)
	if len(r.Candidates) == 1 && r.Candidates[0].Source != SourcePath {
		// A named choice, verified and refused, never replaced: what named it is the fix.
		c := r.Candidates[0]
		fmt.Fprintf(&b, "%s %s: %s; %s", r.namedBy(c.Source), c.Path, c.Reason, r.Fix())
		return b.String()
	}
	if len(r.Candidates) == 0 {
		fmt.Fprintf(&b, "not found on PATH (%d directories searched); %s", r.Searched, r.Fix())
		return b.String()
	}
	// The fix before the candidates: a long list may be cut where it is shown.
	fmt.Fprintf(&b, "no copy on PATH is usable (%s): %d candidate(s): ", r.Fix(), len(r.Candidates))
	for i, c := range r.Candidates {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s): %s", c.Path, c.Source, c.Reason)
		if c.Output != "" {
			b.WriteString(", output ")
			b.WriteString(quoteBounded(c.Output, refusalQuoteLimit))
		}
	}
	return b.String()
}

// namedBy says who chose a named candidate, for people.
func (r *ResolutionRefusal) namedBy(src ExecutableSource) string {
	switch src {
	case SourceExplicit:
		return "the template's command"
	case SourceEnvironment:
		return r.envVar() + " in the worker's environment names"
	case SourcePin:
		return "the pin table (setting " + domain.SettingProviderExecutables + ") names"
	}
	return string(src)
}

func (r *ResolutionRefusal) envVar() string {
	if r.EnvVar != "" {
		return r.EnvVar
	}
	return EnvVarFor(r.Command)
}

// Fix says what makes the command resolve, by what was refused: a named choice is corrected
// where it was made; a command missing from PATH is installed there, or named.
func (r *ResolutionRefusal) Fix() string {
	cmd, env := r.Command, r.envVar()
	if len(r.Candidates) == 1 && r.Candidates[0].Source != SourcePath {
		switch r.Candidates[0].Source {
		case SourceExplicit:
			return fmt.Sprintf("install %[1]s at that path on the node, or give the template the absolute path of an installed %[1]s "+
				"(--command /absolute/path), or no command, to resolve %[1]s from %[2]s, the pin table or PATH", cmd, env)
		case SourceEnvironment:
			return fmt.Sprintf("set %s to the absolute path of an installed %s, or unset it, where the worker starts, and restart the worker", env, cmd)
		case SourcePin:
			return fmt.Sprintf("change or remove the %s entry of the setting %s", cmd, domain.SettingProviderExecutables)
		}
	}
	return fmt.Sprintf("install %[1]s on the node's PATH, give the template its absolute path (--command /absolute/path), "+
		"or set %[2]s=/absolute/path/to/%[1]s where the worker starts", cmd, env)
}

// Unwrap lets callers classify any refusal with errors.Is(err, ErrExecutableRefused).
func (r *ResolutionRefusal) Unwrap() error { return ErrExecutableRefused }

// EnvVarFor is the environment default variable for command, e.g. jam-testagent ->
// JAM_JAM_TESTAGENT_BIN.
func EnvVarFor(command string) string {
	var b strings.Builder
	b.WriteString("JAM_")
	for _, r := range command {
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
		case (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	b.WriteString("_BIN")
	return b.String()
}

// ResolveExecutable picks the executable for req.Command. A named choice (explicit path,
// environment default, pin) is verified and either used or refused, never replaced by a
// later source; only without one is PATH searched, and there the highest version wins.
func ResolveExecutable(ctx context.Context, req ExecutableRequest) (ResolvedExecutable, error) {
	if err := ctx.Err(); err != nil {
		return ResolvedExecutable{}, fmt.Errorf("resolve executable %q: %w", req.Command, err)
	}
	if !isBareCommand(req.Command) {
		return ResolvedExecutable{}, fmt.Errorf("resolve executable %q: %w", req.Command, ErrInvalidCommand)
	}
	if path, src, ok := namedChoice(req); ok {
		return resolveNamed(ctx, req, path, src)
	}
	return resolvePath(ctx, req)
}

// LocateExecutable answers whether req.Command would resolve, running nothing: the sources
// ResolveExecutable consults, in its order, each candidate checked only for existence and
// the executable bit (no version probe). A named choice is verified and never replaced; on
// PATH the first usable copy answers (ResolveExecutable would choose among the usable ones
// by version, and refuse a copy whose probe fails). The result has no Version.
func LocateExecutable(req ExecutableRequest) (ResolvedExecutable, error) {
	if !isBareCommand(req.Command) {
		return ResolvedExecutable{}, fmt.Errorf("locate executable %q: %w", req.Command, ErrInvalidCommand)
	}
	if path, src, ok := namedChoice(req); ok {
		c := Candidate{Path: path, Source: src}
		if c.Reason = verifyFile(path); c.Reason != "" {
			return ResolvedExecutable{}, &ResolutionRefusal{Command: req.Command, Candidates: []Candidate{c}, EnvVar: req.EnvVar}
		}
		return ResolvedExecutable{Path: path, Source: src}, nil
	}
	cands, searched := pathCandidates(req)
	for _, c := range cands {
		if c.Reason == "" {
			return ResolvedExecutable{Path: c.Path, Source: SourcePath}, nil
		}
	}
	return ResolvedExecutable{}, &ResolutionRefusal{Command: req.Command, Candidates: cands, Searched: searched, EnvVar: req.EnvVar}
}

// namedChoice is the executable someone named for req.Command, in ResolveExecutable's order:
// the template's explicit path, the environment default, the pin. ok is false when none did,
// and PATH decides.
func namedChoice(req ExecutableRequest) (path string, src ExecutableSource, ok bool) {
	if req.Explicit != "" {
		return req.Explicit, SourceExplicit, true
	}
	envVar := req.EnvVar
	if envVar == "" {
		envVar = EnvVarFor(req.Command)
	}
	if req.Env != nil {
		if p := req.Env(envVar); p != "" {
			return p, SourceEnvironment, true
		}
	}
	if p, ok := req.Pins[req.Command]; ok {
		return p, SourcePin, true
	}
	return "", "", false
}

// resolveNamed verifies a path someone chose. Its version is recorded when it reports one,
// but a failing probe does not refuse it: the choice was deliberate.
func resolveNamed(ctx context.Context, req ExecutableRequest, path string, src ExecutableSource) (ResolvedExecutable, error) {
	c := Candidate{Path: path, Source: src}
	if c.Reason = verifyFile(path); c.Reason != "" {
		return ResolvedExecutable{}, &ResolutionRefusal{Command: req.Command, Candidates: []Candidate{c}, EnvVar: req.EnvVar}
	}
	_ = probe(ctx, req, &c) // a failing probe only leaves Version empty
	if err := ctx.Err(); err != nil {
		return ResolvedExecutable{}, fmt.Errorf("resolve executable %q: %w", req.Command, err)
	}
	return ResolvedExecutable{Path: path, Version: c.Version, Source: src}, nil
}

// resolvePath asks every usable copy of the command on PATH for its version.
func resolvePath(ctx context.Context, req ExecutableRequest) (ResolvedExecutable, error) {
	cands, searched := pathCandidates(req)
	refusal := &ResolutionRefusal{Command: req.Command, Searched: searched, EnvVar: req.EnvVar}
	best := -1
	for _, c := range cands {
		if ctx.Err() != nil {
			break
		}
		if c.Reason == "" {
			if err := probe(ctx, req, &c); err != nil {
				c.Reason = err.Error()
			} else if c.Version == "" {
				c.Reason = "no version number in its output"
				if c.Output == "" {
					c.Reason += " (it printed nothing)"
				}
			}
		}
		refusal.Candidates = append(refusal.Candidates, c)
		// Strictly greater, so on a tie the earlier PATH entry stays.
		if c.Reason == "" && (best < 0 || compareVersions(c.Version, refusal.Candidates[best].Version) > 0) {
			best = len(refusal.Candidates) - 1
		}
	}
	// A cancelled caller made the probes fail; that is not the candidates' fault.
	if err := ctx.Err(); err != nil {
		return ResolvedExecutable{}, fmt.Errorf("resolve executable %q: %w", req.Command, err)
	}
	if best < 0 {
		return ResolvedExecutable{}, refusal
	}
	w := refusal.Candidates[best]
	return ResolvedExecutable{Path: w.Path, Version: w.Version, Source: SourcePath}, nil
}

// pathCandidates lists the copies of req.Command on req.PATH in PATH order, each verified
// (Reason says why it cannot be executed, "" when it can), and how many distinct absolute
// directories were searched. Relative entries are skipped, and a directory or a binary
// reached twice through links is listed once. It runs nothing.
func pathCandidates(req ExecutableRequest) ([]Candidate, int) {
	var cands []Candidate
	seenDirs := map[string]bool{}
	seenFiles := map[string]bool{}
	for _, dir := range filepath.SplitList(req.PATH) {
		// Relative entries would make the result depend on the working directory.
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		key := filepath.Clean(dir)
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			key = real
		}
		if seenDirs[key] {
			continue
		}
		seenDirs[key] = true

		path := filepath.Join(dir, req.Command)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue
		}
		// Two directories may link to one binary; asking it twice adds nothing.
		if real, err := filepath.EvalSymlinks(path); err == nil {
			if seenFiles[real] {
				continue
			}
			seenFiles[real] = true
		}
		cands = append(cands, Candidate{Path: path, Source: SourcePath, Reason: verifyFile(path)})
	}
	return cands, len(seenDirs)
}

// verifyFile returns why path cannot be executed as given, or "" when it can.
func verifyFile(path string) string {
	if !filepath.IsAbs(path) {
		return "path is not absolute"
	}
	fi, err := os.Stat(path) // follows symlinks: the target is what runs
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "does not exist"
	case err != nil:
		return fmt.Sprintf("cannot be inspected: %v", err)
	case fi.IsDir():
		return "is a directory"
	case !fi.Mode().IsRegular():
		return fmt.Sprintf("is not a regular file (mode %s)", fi.Mode().Type())
	}
	// Effective ids, as exec itself will be checked against them.
	if err := unix.Faccessat(unix.AT_FDCWD, path, unix.X_OK, unix.AT_EACCESS); err != nil {
		if errors.Is(err, unix.EACCES) {
			return "is not executable by this user"
		}
		return fmt.Sprintf("executable check failed: %v", err)
	}
	return ""
}

// probe runs c.Path with the version arguments and records its output and version. The
// argv is fixed and there is no shell; the child gets its own process group so a timeout
// reaches anything it started.
func probe(ctx context.Context, req ExecutableRequest, c *Candidate) error {
	key, cacheable := probeKeyOf(c.Path, req.VersionArgs)
	if cacheable {
		if hit, ok := probes.get(key); ok {
			c.Output, c.Version = hit.output, hit.version
			return nil
		}
	}
	err := runProbe(ctx, req, c)
	if err == nil && cacheable && c.Version != "" {
		probes.put(key, probeHit{output: c.Output, version: c.Version, at: time.Now()})
	}
	return err
}

// probeCacheTTL bounds how long a version answer is reused for an unchanged file. A
// probe spawns the provider's CLI (a Node CLI takes hundreds of milliseconds to answer
// --version), and every wake resolves its executable: without the cache the probe was the
// largest part of a wake. The file's identity is part of the key, so an upgrade that
// replaces the file probes again at once; the TTL covers a launcher whose file stays while
// what it launches changes.
const probeCacheTTL = 10 * time.Minute

// probeCacheMax bounds the cache; past it the cache starts over.
const probeCacheMax = 256

type probeKey struct {
	real         string
	dev, ino     uint64
	size         int64
	mtime, ctime int64
	args         string
}

type probeHit struct {
	output, version string
	at              time.Time
}

type probeCache struct {
	mu sync.Mutex
	m  map[probeKey]probeHit
}

var probes = &probeCache{m: map[probeKey]probeHit{}}

func (p *probeCache) get(k probeKey) (probeHit, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.m[k]
	if !ok || time.Since(h.at) > probeCacheTTL {
		return probeHit{}, false
	}
	return h, true
}

func (p *probeCache) put(k probeKey, h probeHit) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.m) >= probeCacheMax {
		clear(p.m)
	}
	p.m[k] = h
}

// probeKeyOf identifies the file a probe of path would run (through symlinks).
func probeKeyOf(path string, args []string) (probeKey, bool) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return probeKey{}, false
	}
	fi, err := os.Stat(real)
	if err != nil {
		return probeKey{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return probeKey{}, false
	}
	return probeKey{real: real, dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(), args: strings.Join(args, "\x00")}, true
}

// runProbe runs the version probe itself.
func runProbe(ctx context.Context, req ExecutableRequest, c *Candidate) error {
	timeout := req.ProbeTimeout
	if timeout <= 0 {
		timeout = defaultProbeTimeout
	}
	args := req.VersionArgs
	if args == nil {
		args = []string{"--version"}
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	out := &boundedBuffer{limit: probeOutputLimit}
	// A probe runs the candidate's own code: it gets the provider's environment, not the
	// worker's secrets.
	// Never nil: a nil exec.Cmd.Env would hand the probe the worker's secrets.
	env := append([]string{}, req.ProbeEnv...)
	if req.PATH != "" {
		// A candidate found on the searched PATH (an npm shim's "#!/usr/bin/env node") must
		// see that PATH, not the worker's.
		env = withEnv(env, []string{"PATH=" + req.PATH})
	}
	cmd, err := startRetryingBusy(pctx, func() (*exec.Cmd, error) {
		cmd := exec.CommandContext(pctx, c.Path, args...)
		cmd.Stdout, cmd.Stderr = out, out // one comparable writer: exec serialises its writes
		// Its own group, killed whole when the probe ends; Pdeathsig, as Spawn has it, is the
		// backstop for a worker killed outright mid-probe (workers probe every CLI at start).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = probeWaitDelay
		cmd.Env = env
		return cmd, nil
	})
	if err == nil && req.Groups != nil {
		rec, rerr := req.Groups.Add(cmd.Process.Pid, "")
		switch {
		case rerr == nil:
			defer func() { _ = req.Groups.Remove(rec) }() // after the group is killed below
		case !errors.Is(rerr, procgroup.ErrLeaderGone):
			// Not run unrecorded: it could outlive a crash unowned.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			return fmt.Errorf("probe %s: %w", c.Path, rerr)
		}
	}
	if err == nil {
		err = cmd.Wait()
	}
	if cmd.Process != nil {
		// Nothing a version probe started may outlive it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		// The probe itself succeeded; something it left in its group held the pipes.
		err = nil
	}

	c.Output = strings.TrimSpace(out.buf.String())
	c.Version = versionPattern.FindString(c.Output)
	switch {
	case err == nil:
		return nil
	case errors.Is(pctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		c.Version = ""
		return fmt.Errorf("version probe timed out after %s", timeout)
	default:
		c.Version = ""
		return fmt.Errorf("version probe failed: %w", err)
	}
}

// boundedBuffer keeps the first limit bytes and silently drops the rest, so a chatty
// child never blocks on a full pipe.
type boundedBuffer struct {
	buf   bytes.Buffer
	limit int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// compareVersions compares dotted decimal versions component-wise; a missing component
// counts as 0. Components are compared as digit strings so none can overflow.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		x, y := "", ""
		if i < len(as) {
			x = strings.TrimLeft(as[i], "0")
		}
		if i < len(bs) {
			y = strings.TrimLeft(bs[i], "0")
		}
		if c := cmp.Compare(len(x), len(y)); c != 0 {
			return c
		}
		if c := strings.Compare(x, y); c != 0 {
			return c
		}
	}
	return 0
}

func isBareCommand(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsRune(name, '/') &&
		!strings.ContainsRune(name, os.PathSeparator) && !strings.ContainsRune(name, 0)
}

// quoteBounded quotes at most limit bytes of s, cut on a rune boundary.
func quoteBounded(s string, limit int) string {
	if len(s) <= limit {
		return strconv.Quote(s)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf(" (truncated, %d bytes)", len(s))
}
