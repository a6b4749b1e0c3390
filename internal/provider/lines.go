package provider

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
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
		br := bufio.NewReaderSize(r, 64<<10)
		var line []byte
		oversized := false
		dropped := 0
		for {
			chunk, err := br.ReadSlice('\n')
			if !oversized {
				if len(line)+len(chunk) > max {
					oversized, dropped, line = true, len(line), line[:0]
				} else {
					line = append(line, chunk...)
				}
			}
			if oversized {
				dropped += len(chunk)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			complete := err == nil
			if oversized {
				log.Warn("provider protocol line dropped: too long", "bytes", dropped, "limit", max)
				oversized, dropped = false, 0
			} else if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
				if !json.Valid(trimmed) {
					log.Warn("provider protocol line dropped: not JSON", "prefix", string(trimmed[:min(len(trimmed), 200)]))
				} else if _, werr := pw.Write(append(trimmed, '\n')); werr != nil {
					_ = pw.CloseWithError(werr)
					return
				}
			}
			line = line[:0]
			if !complete {
				_ = pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
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
