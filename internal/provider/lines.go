package provider

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// MaxProtocolLine bounds one newline-delimited JSON message from a provider. Longer lines
// are dropped (and logged), never buffered whole.
const MaxProtocolLine = 8 << 20

// GuardJSONLines passes the newline-delimited JSON read from r through a pipe, dropping every
// line that is longer than max bytes or is not valid JSON. Bad input from a provider is logged
// and refused without taking the connection down. The returned reader ends when r does.
func GuardJSONLines(r io.Reader, max int, log *slog.Logger) io.Reader {
	if log == nil {
		log = slog.Default()
	}
	pr, pw := io.Pipe()
	go func() {
		lr := NewLineReader(r, max)
		for {
			line, err := lr.Next()
			var g *Garbage
			switch {
			case errors.As(err, &g):
				log.Warn("provider protocol line dropped: "+g.Reason, "bytes", g.Bytes, "limit", max, "prefix", g.Prefix)
				continue
			case err != nil:
				_ = pw.CloseWithError(err)
				return
			}
			if _, err := pw.Write(append(line, '\n')); err != nil {
				_ = pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

// Garbage is input a protocol reader dropped (too long, or not JSON), reported as an error
// that does not end the stream.
type Garbage struct {
	Reason string
	// Bytes is how much was dropped.
	Bytes int
	// Prefix is the start of what was dropped (empty for an oversized message, which is
	// never buffered whole).
	Prefix string
}

func (g *Garbage) Error() string { return fmt.Sprintf("%s (%d bytes)", g.Reason, g.Bytes) }

// NewGarbage reports a message of b that was dropped for reason.
func NewGarbage(reason string, b []byte) *Garbage {
	return &Garbage{Reason: reason, Bytes: len(b), Prefix: string(b[:min(len(b), 200)])}
}

// LineReader reads newline-delimited JSON. A line longer than max is dropped without being
// buffered whole, and so is a line that is not JSON: both come back as *Garbage and the next
// line is read as usual. Blank lines are skipped.
type LineReader struct {
	br  *bufio.Reader
	max int
}

// NewLineReader reads lines of at most max bytes from r.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next JSON line (trimmed, valid until the next call), a *Garbage for a
// line dropped, or the reader's error (io.EOF at the end). A final line without a newline
// still counts.
func (lr *LineReader) Next() ([]byte, error) {
	var line []byte
	dropped := 0
	for {
		chunk, err := lr.br.ReadSlice('\n')
		if dropped == 0 && len(line)+len(chunk) <= lr.max {
			line = append(line, chunk...)
		} else {
			dropped += len(line) + len(chunk)
			line = line[:0]
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if dropped > 0 {
			return nil, &Garbage{Reason: "too long", Bytes: dropped}
		}
		trimmed := bytes.TrimSpace(line)
		switch {
		case len(trimmed) > 0 && !json.Valid(trimmed):
			return nil, NewGarbage("not JSON", trimmed)
		case len(trimmed) > 0:
			// The line is whole; a read error after it comes with the next call.
			return trimmed, nil
		case err != nil:
			return nil, err
		}
		line = line[:0]
	}
}

// TailBuffer keeps the last n bytes written to it (a child's stderr for diagnostics).
type TailBuffer struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

// NewTailBuffer keeps the last n bytes.
func NewTailBuffer(n int) *TailBuffer { return &TailBuffer{n: n} }

func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.n {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.n:]...)
	}
	return len(p), nil
}

// String returns the kept tail.
func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
