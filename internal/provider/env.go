package provider

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jam-dev/jam/internal/domain"
)

// ErrEnvRefused: a template asks for a variable no runtime may receive.
var ErrEnvRefused = errors.New("environment variable refused for the runtime")

// hostNativeBase is what every host-native provider gets from the worker's environment when
// set: enough to find programs, the operator's home (and so their own login and config),
// the locale and a temporary directory. Nothing else of the worker crosses by default.
var hostNativeBase = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ"}

// HostNativeEnv builds a host-native provider's environment from the worker's, the way a
// sandboxed one is built: the small base, the variables the provider's catalog row names
// for its state and configuration (passed through when the operator set them), and the
// template's allowlist. A custody key or a JAM_ variable the row does not name is refused,
// never passed; deliberate additions (extra) are appended last and win.
func HostNativeEnv(worker []string, row domain.TransportSpec, allowlist []string, extra ...string) ([]string, error) {
	values := make(map[string]string, len(worker))
	for _, kv := range worker {
		if k, v, ok := strings.Cut(kv, "="); ok {
			values[k] = v
		}
	}
	names := slices.Clone(hostNativeBase)
	for _, s := range row.State {
		names = append(names, s.Name)
	}
	names = append(names, row.ConfigEnv...)
	for _, name := range allowlist {
		switch {
		case !domain.IsEnvName(name):
			return nil, fmt.Errorf("%w: %q is not a variable name", ErrEnvRefused, name)
		case domain.IsCustodyEnvKey(name):
			return nil, fmt.Errorf("%w: %s holds an agent or operator credential", ErrEnvRefused, name)
		case domain.IsJamEnvKey(name):
			return nil, fmt.Errorf("%w: %s is Jam's own configuration", ErrEnvRefused, name)
		}
		names = append(names, name)
	}
	out := make([]string, 0, len(names)+len(extra))
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		v, ok := values[name]
		// Defence in depth: the catalog never names a custody key, and this keeps it so.
		if !ok || seen[name] || domain.IsCustodyEnvKey(name) {
			continue
		}
		seen[name] = true
		out = append(out, name+"="+v)
	}
	return withEnv(out, extra), nil
}

// withEnv returns env with each NAME=VALUE of extra set, replacing an earlier value of the
// name; env itself is not modified.
func withEnv(env, extra []string) []string {
	out := slices.Clone(env)
	for _, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		out = slices.DeleteFunc(out, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		out = append(out, kv)
	}
	return out
}
