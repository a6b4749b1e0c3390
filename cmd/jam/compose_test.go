package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// There is no Docker engine on the build machine, so the compose file is checked against
// the binary itself: every jam service runs a real subcommand with real flags, and every
// JAM_* variable it sets is one that subcommand reads.

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image     string         `yaml:"image"`
	Build     *composeBuild  `yaml:"build"`
	Command   []string       `yaml:"command"`
	Env       map[string]any `yaml:"environment"`
	DependsOn map[string]any `yaml:"depends_on"`
	Volumes   []string       `yaml:"volumes"`
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

// envWithoutFlag are variables a command reads directly (secrets have no flag by design).
var envWithoutFlag = map[string][]string{
	"server": {"JAM_API_TOKEN"},
	"dev":    {"JAM_API_TOKEN"},
}

// requiredEnv must reach the command, by variable or flag, or it refuses to start.
var requiredEnv = map[string][]string{
	"server":     {"JAM_DATABASE_URL", "JAM_TEMPORAL_ADDRESS", "JAM_API_TOKEN"},
	"worker":     {"JAM_DATABASE_URL", "JAM_TEMPORAL_ADDRESS"},
	"migrate up": {"JAM_DATABASE_URL"},
}

var pinnedImage = regexp.MustCompile(`^[a-z0-9./-]+:[0-9][A-Za-z0-9._-]*$`)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestComposeServicesMatchTheBinary(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	want := []string{"postgres", "temporal", "temporal-ui", "jam-migrate", "jam-migrate-temporal", "jam-server", "jam-worker"}
	for _, name := range want {
		if _, ok := cf.Services[name]; !ok {
			t.Errorf("service %s is missing", name)
		}
	}

	jamImage := ""
	for name, svc := range cf.Services {
		if svc.Build != nil {
			if svc.Build.Dockerfile == "" {
				t.Errorf("%s: build without a dockerfile", name)
			} else if _, err := os.Stat(filepath.Join(root, svc.Build.Context, svc.Build.Dockerfile)); err != nil {
				t.Errorf("%s: dockerfile: %v", name, err)
			}
			jamImage = svc.Image
		}
	}
	if jamImage == "" {
		t.Fatal("no service builds the jam image")
	}

	for name, svc := range cf.Services {
		for dep := range svc.DependsOn {
			if _, ok := cf.Services[dep]; !ok {
				t.Errorf("%s depends on unknown service %s", name, dep)
			}
		}
		for _, v := range svc.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("%s mounts %s: %v", name, src, err)
				}
			} else if _, ok := cf.Volumes[src]; !ok && !strings.HasPrefix(src, "/") {
				t.Errorf("%s mounts undeclared volume %s", name, src)
			}
		}
		if svc.Image != jamImage {
			if svc.Build == nil && !pinnedImage.MatchString(svc.Image) {
				t.Errorf("%s: image %q must be pinned to a version", name, svc.Image)
			}
			continue
		}
		checkJamService(t, name, svc)
	}
}

func checkJamService(t *testing.T, name string, svc composeService) {
	t.Helper()
	if len(svc.Command) == 0 {
		t.Errorf("%s: no command", name)
		return
	}
	rootCmd := newRootCmd()
	cmd, rest, err := rootCmd.Find(svc.Command)
	if err != nil || cmd == rootCmd || cmd.RunE == nil {
		t.Errorf("%s: %v is not a runnable jam command (%v)", name, svc.Command, err)
		return
	}
	path := strings.TrimPrefix(cmd.CommandPath(), "jam ")
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("%s: flags %v: %v", name, rest, err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		t.Errorf("%s: arguments: %v", name, err)
	}

	envFlags := map[string]*pflag.Flag{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if env := flagEnv(f); env != "" {
			envFlags[env] = f
		}
	})
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if env := flagEnv(f); env != "" {
			envFlags[env] = f
		}
	})
	for env := range svc.Env {
		if !strings.HasPrefix(env, "JAM_") {
			continue
		}
		if _, ok := envFlags[env]; !ok && !slices.Contains(envWithoutFlag[topName(cmd)], env) {
			t.Errorf("%s: %s is not read by `jam %s`", name, env, path)
		}
	}
	for _, env := range requiredEnv[path] {
		_, viaEnv := svc.Env[env]
		viaFlag := false
		if f, ok := envFlags[env]; ok {
			viaFlag = cmd.Flags().Changed(f.Name)
		}
		if !viaEnv && !viaFlag {
			t.Errorf("%s: `jam %s` needs %s", name, path, env)
		}
	}
}

func topName(cmd *cobra.Command) string {
	for cmd.HasParent() && cmd.Parent().HasParent() {
		cmd = cmd.Parent()
	}
	return cmd.Name()
}

func TestDockerfileBuildsAStaticNonRootJam(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	if n := len(regexp.MustCompile(`(?m)^FROM `).FindAllString(text, -1)); n < 2 {
		t.Errorf("want a multi-stage build, found %d stages", n)
	}
	for _, must := range []string{"CGO_ENABLED=0", "./cmd/jam", `ENTRYPOINT ["/usr/local/bin/jam"]`} {
		if !strings.Contains(text, must) {
			t.Errorf("Dockerfile lacks %q", must)
		}
	}
	users := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(text, -1)
	if len(users) == 0 {
		t.Fatal("Dockerfile sets no USER")
	}
	if u := users[len(users)-1][1]; u == "root" || u == "0" || strings.HasPrefix(u, "0:") {
		t.Errorf("final USER %s is root", u)
	}
}
