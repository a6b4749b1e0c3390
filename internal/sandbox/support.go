package sandbox

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jam-dev/jam/internal/domain"
)

// EnvSbx names the `sbx` executable explicitly (flag --sbx).
const EnvSbx = "JAM_SBX"

// Config locates a node's `sbx`. It is parsed once when the worker starts (ConfigFromEnv)
// and injected, so nothing below the startup code reads the process environment.
type Config struct {
	// Sbx is the `sbx` executable the operator named (--sbx / JAM_SBX); "" searches PATH.
	Sbx string
	// PATH is the worker's PATH, searched for `sbx` when Sbx is "".
	PATH string
}

// ConfigFromEnv reads JAM_SBX and PATH through getenv.
func ConfigFromEnv(getenv func(string) string) Config {
	return Config{Sbx: getenv(EnvSbx), PATH: getenv("PATH")}
}

// Support is the classified answer of the support probe.
type Support struct {
	Status domain.SandboxSupport `json:"status"`
	// Path is the `sbx` probed ("" when none was found).
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
	// Detail says why, for people.
	Detail    string    `json:"detail,omitempty"`
	CheckedAt time.Time `json:"checked_at"`
}

// Locate finds `sbx`: the explicit path when given (it must be an absolute path to an
// executable), else the first `sbx` on path.
func Locate(explicit, path string) (string, error) {
	if explicit != "" {
		if !filepath.IsAbs(explicit) {
			return "", &domain.ValidationError{Field: "sbx", Detail: "must be an absolute path"}
		}
		return exec.LookPath(explicit)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // a relative PATH entry would resolve against the worker's cwd
		}
		if p, err := exec.LookPath(filepath.Join(dir, "sbx")); err == nil {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// LocateProblem says, for people, why Locate(explicit, …) found no `sbx` (err is its error).
func LocateProblem(explicit string, err error) string {
	if explicit != "" {
		return EnvSbx + " " + explicit + " is not an executable: " + err.Error()
	}
	return "no sbx executable: install Docker Sandboxes or set " + EnvSbx
}

// Probe classifies this node's sandbox support within ReadOnlyTimeout in all: absent (no
// `sbx`), too old, daemon down (`sbx` answers but cannot list sandboxes), or ok. It never
// fails: the answer is the classification.
func Probe(ctx context.Context, explicit, path string, env []string) Support {
	ctx, cancel := context.WithTimeout(ctx, ReadOnlyTimeout)
	defer cancel()
	s := Support{CheckedAt: time.Now().UTC()}
	p, err := Locate(explicit, path)
	if err != nil {
		s.Status, s.Detail = domain.SandboxAbsent, LocateProblem(explicit, err)
		return s
	}
	s.Path = p
	d := &Driver{Path: p, Env: env}
	v, err := d.ProbeVersion(ctx)
	if err != nil {
		s.Status, s.Detail = domain.SandboxAbsent, "sbx did not report its version: "+errDetail(err)
		return s
	}
	s.Version = v.String()
	if v.Less(MinVersion) {
		s.Status, s.Detail = domain.SandboxTooOld, "sbx "+v.String()+" is older than the oldest supported release "+MinVersion.String()
		return s
	}
	if _, err := d.List(ctx); err != nil {
		s.Status, s.Detail = domain.SandboxDaemonDown, "sbx cannot list sandboxes (is the Docker Sandboxes daemon running?): "+errDetail(err)
		return s
	}
	s.Status = domain.SandboxSupported
	return s
}

func errDetail(err error) string {
	var ce *CommandError
	if errors.As(err, &ce) && ce.Stderr != "" {
		return strings.TrimSpace(ce.Stderr)
	}
	return err.Error()
}
