package jsonrpc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/jam-dev/jam/internal/provider"
)

// Framing is how messages are delimited on the wire.
type Framing int

const (
	// Lines is newline-delimited JSON, one message a line (Codex app-server).
	Lines Framing = iota
	// ContentLength is the LSP framing: a header block with Content-Length, a blank line,
	// then exactly that many bytes of JSON (Copilot SDK server).
	ContentLength
)

// frameReader yields one message at a time: its bytes, a *provider.Garbage for input
// dropped (reported, not fatal), or another error once the stream cannot go on.
type frameReader interface {
	Next() ([]byte, error)
}

// ErrFrame: a Content-Length frame Jam cannot read; the stream is out of step after it.
var ErrFrame = errors.New("malformed frame")

// frameDecoder reads Content-Length frames. A frame longer than max is skipped unread (its
// length is known, so the stream stays in step) and reported; a header that cannot be read
// leaves the stream out of step, and ends it.
type frameDecoder struct {
	br  *bufio.Reader
	tp  *textproto.Reader
	max int
}

func newFrameDecoder(r io.Reader, max int) *frameDecoder {
	br := bufio.NewReaderSize(r, 64<<10)
	return &frameDecoder{br: br, tp: textproto.NewReader(br), max: max}
}

func (d *frameDecoder) Next() ([]byte, error) {
	h, err := d.tp.ReadMIMEHeader()
	if err != nil {
		if errors.Is(err, io.EOF) && len(h) == 0 {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("%w: header: %w", ErrFrame, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(h.Get("Content-Length")))
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%w: Content-Length %q", ErrFrame, h.Get("Content-Length"))
	}
	if n > d.max {
		if _, err := io.CopyN(io.Discard, d.br, int64(n)); err != nil {
			return nil, fmt.Errorf("%w: body: %w", ErrFrame, err)
		}
		return nil, &provider.Garbage{Reason: "too long", Bytes: n}
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.br, b); err != nil {
		return nil, fmt.Errorf("%w: body: %w", ErrFrame, err)
	}
	if !json.Valid(b) {
		return nil, provider.NewGarbage("not JSON", b)
	}
	return b, nil
}
