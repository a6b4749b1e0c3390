package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envAnnotation marks a flag with the environment variable that sets it; envSetAnnotation
// marks a flag that variable did set (so errors can say where a value came from).
const (
	envAnnotation    = "jam_env"
	envSetAnnotation = "jam_env_set"
)

// bindEnv makes env set the flag when the flag is not given on the command line, and says
// so in the help text.
func bindEnv(fs *pflag.FlagSet, name, env string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("bindEnv: no flag " + name)
	}
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[envAnnotation] = []string{env}
	f.Usage += " [env " + env + "]"
}

// applyEnv sets every unset flag of cmd from its environment variable.
func applyEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		env := f.Annotations[envAnnotation]
		if err != nil || len(env) == 0 || f.Changed {
			return
		}
		if v, ok := os.LookupEnv(env[0]); ok {
			if setErr := cmd.Flags().Set(f.Name, v); setErr != nil {
				err = fmt.Errorf("%s=%q: %w", env[0], v, setErr)
				return
			}
			f.Annotations[envSetAnnotation] = env
		}
	})
	return err
}

// flagEnv returns the environment variable bound to a flag, if any.
func flagEnv(f *pflag.Flag) string {
	if env := f.Annotations[envAnnotation]; len(env) > 0 {
		return env[0]
	}
	return ""
}

// flagOrigin says where a flag's value came from: its environment variable, the flag on the
// command line, or "" for its default (also for a nil flag).
func flagOrigin(f *pflag.Flag) string {
	switch {
	case f == nil || !f.Changed:
		return ""
	case len(f.Annotations[envSetAnnotation]) > 0:
		return f.Annotations[envSetAnnotation][0]
	default:
		return "--" + f.Name
	}
}

// defaultHome is $XDG_DATA_HOME/jam, else ~/.local/share/jam (JAM_HOME overrides both
// through the --home flag's binding).
func defaultHome() string {
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "jam")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "jam")
	}
	return filepath.Join(os.TempDir(), "jam")
}

func defaultNode() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "local"
	}
	return h
}

func addHomeFlag(fs *pflag.FlagSet, home *string) {
	fs.StringVar(home, "home", defaultHome(), "data directory")
	bindEnv(fs, "home", "JAM_HOME")
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}
