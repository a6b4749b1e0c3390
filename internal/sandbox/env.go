package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/jam-dev/jam/internal/domain"
)

// ProxySentinel is the value Docker's egress proxy stands in for a stored credential with:
// the guest sees it in place of the secret and the proxy writes the real header.
const ProxySentinel = "proxy-managed"

// ErrEnvRefused: a variable may not be delivered to a guest.
var ErrEnvRefused = errors.New("environment variable refused for the sandbox")

// ValidateEnv checks KEY=VALUE pairs bound for a guest: well-formed names, single-line values,
// no custody key ever (not even with the proxy sentinel), and no secret-like name unless its
// value is the proxy sentinel (credentials travel only as `sbx secret` service secrets).
func ValidateEnv(pairs []string) error {
	for _, kv := range pairs {
		name, value, ok := strings.Cut(kv, "=")
		switch {
		case !ok || !domain.IsEnvName(name):
			return fmt.Errorf("%w: %q is not NAME=VALUE", ErrEnvRefused, truncate([]byte(name)))
		case strings.ContainsAny(value, "\n\r\x00"):
			return fmt.Errorf("%w: %s holds a line break or NUL", ErrEnvRefused, name)
		case domain.IsCustodyEnvKey(name):
			return fmt.Errorf("%w: %s is a custody credential and never enters a guest", ErrEnvRefused, name)
		case domain.IsSecretLikeEnvKey(name) && value != ProxySentinel:
			return fmt.Errorf("%w: %s looks secret; give credentials to the sandbox as sbx service secrets", ErrEnvRefused, name)
		}
	}
	return nil
}

// GuestEnv splits what a sandboxed provider is given by provenance: allowlisted host values
// go to the env file, Jam's own provider-home paths as explicit --env pairs (some sbx
// releases accept --env-file without delivering it, and these must arrive). Both are checked.
func GuestEnv(allowlist []string, lookup func(string) (string, bool), providerHome []string) (file, explicit []string, err error) {
	for _, name := range allowlist {
		if domain.IsJamEnvKey(name) {
			return nil, nil, fmt.Errorf("%w: %s is Jam's own configuration", ErrEnvRefused, name)
		}
		if v, ok := lookup(name); ok {
			file = append(file, name+"="+v)
		}
	}
	if err := ValidateEnv(file); err != nil {
		return nil, nil, err
	}
	if err := ValidateEnv(providerHome); err != nil {
		return nil, nil, err
	}
	return file, providerHome, nil
}

// EnvFile is a short-lived, mode 0600 file of KEY=VALUE lines for `sbx exec --env-file`. It is
// released (deleted) once the provider started; Release is idempotent.
type EnvFile struct {
	path string
	once sync.Once
}

// WriteEnvFile writes checked pairs into a new private file in dir.
func WriteEnvFile(dir string, pairs []string) (*EnvFile, error) {
	if err := ValidateEnv(pairs); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".jam-env-*")
	if err != nil {
		return nil, fmt.Errorf("sandbox env file: %w", err)
	}
	ef := &EnvFile{path: f.Name()}
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.WriteString(strings.Join(pairs, "\n") + "\n")
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		ef.Release()
		return nil, fmt.Errorf("sandbox env file: %w", err)
	}
	return ef, nil
}

// Path is the file's path.
func (e *EnvFile) Path() string { return e.path }

// Release deletes the file.
func (e *EnvFile) Release() {
	e.once.Do(func() { _ = os.Remove(e.path) })
}

// HostEnv is the environment the `sbx` CLI itself runs with on the host: the worker's, less
// custody keys, Jam's own configuration and secret-looking names. `sbx` needs its own
// configuration (PATH, HOME, DOCKER_*), never Jam's or a provider's credentials.
func HostEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if domain.IsCustodyEnvKey(name) || domain.IsJamEnvKey(name) || domain.IsSecretLikeEnvKey(name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}
