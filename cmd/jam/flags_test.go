package main

import (
	"testing"

	"github.com/spf13/pflag"
)

func TestEveryRunFlagHasAnEnvironmentVariable(t *testing.T) {
	root := newRootCmd()
	for _, path := range [][]string{{"dev"}, {"server"}, {"worker"}, {"migrate", "up"}, {"node", "list"}} {
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		check := func(f *pflag.Flag) {
			if f.Name != "help" && flagEnv(f) == "" && f.Name != "json" && f.Name != "quiet" && f.Name != "steps" && f.Name != "all" {
				t.Errorf("jam %v --%s has no environment variable", path, f.Name)
			}
		}
		cmd.Flags().VisitAll(check)
		cmd.InheritedFlags().VisitAll(check)
	}
}

func TestEnvironmentSetsUnsetFlagsOnly(t *testing.T) {
	t.Setenv("JAM_LISTEN", "127.0.0.1:9999")
	t.Setenv("JAM_NODE", "from-env")
	root := newRootCmd()
	cmd, _, _ := root.Find([]string{"server"})
	if err := cmd.ParseFlags([]string{"--listen", "127.0.0.1:1111"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(cmd); err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("listen").Value.String(); got != "127.0.0.1:1111" {
		t.Fatalf("flag given on the command line was overridden: %s", got)
	}
	wk, _, _ := newRootCmd().Find([]string{"worker"})
	if err := applyEnv(wk); err != nil {
		t.Fatal(err)
	}
	if got := wk.Flags().Lookup("node").Value.String(); got != "from-env" {
		t.Fatalf("node = %s, want from-env", got)
	}
	t.Setenv("JAM_DEV_EPHEMERAL", "maybe")
	dev, _, _ := newRootCmd().Find([]string{"dev"})
	if err := applyEnv(dev); err == nil {
		t.Fatal("a malformed boolean variable was accepted")
	}
}
