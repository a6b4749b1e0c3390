package app

import (
	"net"
	"strings"
	"testing"
)

func devOptions() Options {
	return Options{Listen: "127.0.0.1:0", TemporalListen: "127.0.0.1:0", UIListen: "127.0.0.1:0"}
}

// The Temporal frontend and Web UI take write actions without Jam's token: jam dev keeps
// them on loopback unless the operator allows otherwise, and says how in one line.
func TestDevRefusesARemoteTemporalOrUIAddressUnlessAllowed(t *testing.T) {
	refused := []struct {
		set  func(*Options, string)
		addr string
		flag string
		env  string
	}{
		{func(o *Options, a string) { o.UIListen = a }, "0.0.0.0:0", "--ui-listen", "JAM_DEV_UI_LISTEN"},
		{func(o *Options, a string) { o.UIListen = a }, "192.0.2.7:0", "--ui-listen", "JAM_DEV_UI_LISTEN"},
		{func(o *Options, a string) { o.TemporalListen = a }, "[::]:0", "--temporal-listen", "JAM_DEV_TEMPORAL_LISTEN"},
		{func(o *Options, a string) { o.TemporalListen = a }, "jam.example:0", "--temporal-listen", "JAM_DEV_TEMPORAL_LISTEN"},
	}
	for _, c := range refused {
		o := devOptions()
		c.set(&o, c.addr)
		err := o.checkDevListen()
		if err == nil {
			t.Fatalf("%s %s was accepted", c.flag, c.addr)
		}
		msg := err.Error()
		for _, want := range []string{c.addr, c.flag, c.env, "--allow-remote-ui", EnvAllowRemoteUI} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s %s: %q does not name %s", c.flag, c.addr, msg, want)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("more than one line: %q", msg)
		}
		o.AllowRemoteUI = true
		if err := o.checkDevListen(); err != nil {
			t.Errorf("%s %s with --allow-remote-ui: %v", c.flag, c.addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "127.0.0.2:0", "localhost:0", "[::1]:0", ":0"} {
		o := devOptions()
		o.UIListen, o.TemporalListen = addr, addr
		if err := o.checkDevListen(); err != nil {
			t.Errorf("loopback %s refused: %v", addr, err)
		}
	}
	// The API has Jam's token: any address is the operator's choice.
	o := devOptions()
	o.Listen = "0.0.0.0:0"
	if err := o.checkDevListen(); err != nil {
		t.Errorf("API on 0.0.0.0: %v", err)
	}
}

// An address already taken, by another process or by another of jam dev's own settings, is
// refused before anything starts, in one line naming the address and how to move it.
func TestDevRefusesATakenAddressNamingItsSetting(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	cases := []struct {
		set       func(*Options)
		flag, env string
	}{
		{func(o *Options) { o.Listen = addr }, "--listen", "JAM_LISTEN"},
		{func(o *Options) { o.TemporalListen = addr }, "--temporal-listen", "JAM_DEV_TEMPORAL_LISTEN"},
		{func(o *Options) { o.UIListen = addr }, "--ui-listen", "JAM_DEV_UI_LISTEN"},
	}
	for _, c := range cases {
		o := devOptions()
		c.set(&o)
		err := o.checkDevListen()
		if err == nil {
			t.Fatalf("%s %s (taken) was accepted", c.flag, addr)
		}
		msg := err.Error()
		if !strings.Contains(msg, addr) || !strings.Contains(msg, c.flag) || !strings.Contains(msg, c.env) ||
			!strings.Contains(msg, "in use") || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q", c.flag, msg)
		}
	}

	// Two settings naming one free port: the second is named.
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	same := free.Addr().String()
	free.Close()
	o := devOptions()
	o.TemporalListen, o.UIListen = same, same
	if err := o.checkDevListen(); err == nil || !strings.Contains(err.Error(), "--ui-listen") {
		t.Fatalf("one port for the frontend and the UI: %v", err)
	}
	// Checking holds nothing afterwards.
	o = devOptions()
	o.TemporalListen = same
	if err := o.checkDevListen(); err != nil {
		t.Fatalf("a free address after a check: %v", err)
	}
	if ln, err := net.Listen("tcp", same); err != nil {
		t.Fatalf("the check kept %s: %v", same, err)
	} else {
		ln.Close()
	}
}
