// Command jam-testwrap is a test-only stdio wrapper around a real agent CLI. The real CLIs
// cannot be made to misbehave on their protocol stream, so the provider conformance suite
// (internal/provider/providertest) runs them through this wrapper to feed Jam's REAL adapter
// parsing what a broken provider would send: it starts the CLI named by JAM_TESTWRAP_EXEC
// with its own arguments, passes stdin and stderr through, copies the CLI's stdout message
// by message (whole newline-delimited lines, or whole Content-Length frames with
// JAM_TESTWRAP_FRAMING=content-length), and:
//
//   - on SIGUSR1 writes a garbage message between two real ones (invalid JSON, then JSON
//     that is no protocol message);
//   - on SIGUSR2 writes one oversized message (9 MiB, over provider.MaxProtocolLine);
//   - with JAM_TESTWRAP_EXIT_AFTER=N forwards only the first N bytes of the CLI's stdout and
//     then exits (status 3) mid-handshake, leaving the CLI to its process group (acknowledged
//     as "injected exit").
//
// After an injection it appends "injected KIND" to the file JAM_TESTWRAP_ACK names (and
// says so on stderr), so a test knows the message is on the stream. Every other signal has its default action, so a process-group
// SIGTERM or SIGKILL ends the wrapper with its CLI.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/textproto"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// oversizedBytes is over provider.MaxProtocolLine (8 MiB).
const oversizedBytes = 9 << 20

func main() { os.Exit(run()) }

func run() int {
	exe := os.Getenv("JAM_TESTWRAP_EXEC")
	if exe == "" {
		fmt.Fprintln(os.Stderr, "jam-testwrap: JAM_TESTWRAP_EXEC names no program")
		return 2
	}
	framed := os.Getenv("JAM_TESTWRAP_FRAMING") == "content-length"
	exitAfter := -1
	if v := os.Getenv("JAM_TESTWRAP_EXIT_AFTER"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "jam-testwrap: JAM_TESTWRAP_EXIT_AFTER=%q is not a byte count\n", v)
			return 2
		}
		exitAfter = n
	}
	// Notify before the CLI starts: a signal that comes early must not kill the wrapper.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)

	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = withoutWrapperEnv(os.Environ())
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "jam-testwrap: %v\n", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "jam-testwrap: start %s: %v\n", exe, err)
		return 2
	}

	w := &writer{framed: framed}
	if exitAfter >= 0 {
		// The handshake exit: some bytes, then the wrapper is gone mid-message.
		_, _ = io.CopyN(os.Stdout, out, int64(exitAfter))
		fmt.Fprintf(os.Stderr, "jam-testwrap: exiting after %d bytes\n", exitAfter)
		ack("exit")
		return 3
	}
	go func() {
		for s := range sigs {
			kind := "garbage"
			if s == syscall.SIGUSR2 {
				kind = "oversized"
			}
			w.inject(kind)
			fmt.Fprintf(os.Stderr, "jam-testwrap: injected %s\n", kind)
			ack(kind)
		}
	}()
	if framed {
		copyFrames(w, out)
	} else {
		copyLines(w, out)
	}
	if err := cmd.Wait(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() >= 0 {
			return ee.ExitCode()
		}
		return 1
	}
	return 0
}

// ack appends "injected KIND" to the JAM_TESTWRAP_ACK file, if one is named (its time is
// when the wrapper did it).
func ack(kind string) {
	path := os.Getenv("JAM_TESTWRAP_ACK")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "jam-testwrap: ack: %v\n", err)
		return
	}
	fmt.Fprintf(f, "injected %s\n", kind)
	_ = f.Close()
}

// withoutWrapperEnv keeps the wrapper's own settings from the CLI.
func withoutWrapperEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "JAM_TESTWRAP_") {
			out = append(out, kv)
		}
	}
	return out
}

// writer writes whole messages to stdout, so an injected one never splits a real one.
type writer struct {
	mu     sync.Mutex
	framed bool
}

func (w *writer) write(b []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = os.Stdout.Write(b)
}

// inject writes the messages of one injection.
func (w *writer) inject(kind string) {
	var bodies [][]byte
	switch kind {
	case "garbage":
		bodies = [][]byte{[]byte("{not json"), []byte(`{"jam_testwrap":"garbage","params":[1,2,3]}`)}
	default:
		big := bytes.Repeat([]byte{'x'}, oversizedBytes)
		bodies = [][]byte{append(append([]byte(`{"jsonrpc":"2.0","method":"jam/oversized","params":{"blob":"`), big...), `"}}`...)}
	}
	for _, b := range bodies {
		if w.framed {
			w.write(append([]byte(fmt.Sprintf("Content-Length: %d\r\n\r\n", len(b))), b...))
		} else {
			w.write(append(b, '\n'))
		}
	}
}

// copyLines forwards newline-delimited messages whole, however long.
func copyLines(w *writer, r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			w.write(line)
		}
		if err != nil {
			return
		}
	}
}

// copyFrames forwards Content-Length framed messages (headers and body) whole.
func copyFrames(w *writer, r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	tp := textproto.NewReader(br)
	for {
		hdr, err := tp.ReadMIMEHeader()
		if err != nil {
			return
		}
		n, err := strconv.Atoi(hdr.Get("Content-Length"))
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "jam-testwrap: a frame without a Content-Length: %v\n", hdr)
			return
		}
		var buf bytes.Buffer
		for k, vs := range hdr {
			for _, v := range vs {
				fmt.Fprintf(&buf, "%s: %s\r\n", k, v)
			}
		}
		buf.WriteString("\r\n")
		if _, err := io.CopyN(&buf, br, int64(n)); err != nil {
			return
		}
		w.write(buf.Bytes())
	}
}
