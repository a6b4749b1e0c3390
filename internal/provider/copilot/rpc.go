package copilot

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/jam-dev/jam/internal/provider"
)

// The Copilot SDK server speaks JSON-RPC 2.0 framed the LSP way: a header block with
// Content-Length, a blank line, then exactly that many bytes of JSON. The server sends
// notifications (session.event) and may send requests of its own, which Jam declines.

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("copilot error %d: %s", e.Code, e.Message) }

// message is any frame on the wire.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// errConnClosed: the server's stdout ended.
var errConnClosed = errors.New("copilot server connection closed")

// errFrame: a frame Jam cannot read; the connection is not trusted after it.
var errFrame = errors.New("malformed copilot frame")

// conn is one SDK-server connection.
type conn struct {
	w   io.Writer
	log *slog.Logger
	// onNotify runs on the reader goroutine for each notification, in order.
	onNotify func(method string, params json.RawMessage)

	wmu     sync.Mutex
	mu      sync.Mutex
	next    int64
	pending map[int64]chan message
	done    chan struct{}
}

func newConn(w io.Writer, log *slog.Logger) *conn {
	return &conn{w: w, log: log, pending: map[int64]chan message{}, done: make(chan struct{})}
}

// Done is closed once the connection's reader stopped.
func (c *conn) Done() <-chan struct{} { return c.done }

// readFrame reads one Content-Length frame, refusing one above provider.MaxProtocolLine.
func readFrame(tp *textproto.Reader, br *bufio.Reader) ([]byte, error) {
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("%w: header: %w", errFrame, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(h.Get("Content-Length")))
	if err != nil || n < 0 || n > provider.MaxProtocolLine {
		return nil, fmt.Errorf("%w: Content-Length %q", errFrame, h.Get("Content-Length"))
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, fmt.Errorf("%w: body: %w", errFrame, err)
	}
	return b, nil
}

// serve reads frames until r ends or a frame is malformed, dispatching responses,
// notifications and server requests.
func (c *conn) serve(r io.Reader) {
	defer func() {
		c.mu.Lock()
		for id, ch := range c.pending {
			close(ch)
			delete(c.pending, id)
		}
		c.mu.Unlock()
		close(c.done)
	}()
	br := bufio.NewReaderSize(r, 64<<10)
	tp := textproto.NewReader(br)
	for {
		b, err := readFrame(tp, br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				c.log.Warn("copilot connection dropped", "error", err)
			}
			return
		}
		var m message
		if err := json.Unmarshal(b, &m); err != nil {
			c.log.Warn("copilot sent a frame that is not JSON", "error", err)
			continue
		}
		switch {
		case m.Method != "" && len(m.ID) > 0:
			go c.decline(m)
		case m.Method != "":
			if c.onNotify != nil {
				c.onNotify(m.Method, m.Params)
			}
		case len(m.ID) > 0:
			id, err := strconv.ParseInt(string(m.ID), 10, 64)
			if err != nil {
				continue // not one of ours: Jam's ids are integers
			}
			c.mu.Lock()
			ch, ok := c.pending[id]
			delete(c.pending, id)
			c.mu.Unlock()
			if ok {
				ch <- m
			}
		}
	}
}

// decline answers a server request Jam does not serve: everything Jam handles arrives as
// session events answered by Jam's own requests.
func (c *conn) decline(m message) {
	c.log.Debug("copilot server request declined", "method", m.Method)
	err := c.write(map[string]any{"jsonrpc": "2.0", "id": m.ID,
		"error": &rpcError{Code: -32601, Message: "Jam does not handle " + m.Method}})
	if err != nil {
		c.log.Debug("copilot: declining a server request failed", "method", m.Method, "error", err)
	}
}

func (c *conn) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := fmt.Fprintf(c.w, "Content-Length: %d\r\n\r\n", len(b)); err != nil {
		return err
	}
	_, err = c.w.Write(b)
	return err
}

// call sends a request and decodes its result into out (nil discards it). ctx bounds the
// wait; the request itself cannot be withdrawn.
func (c *conn) call(ctx context.Context, method string, params, out any) error {
	c.mu.Lock()
	id := c.next
	c.next++
	ch := make(chan message, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	select {
	case <-c.done:
		c.forget(id)
		return fmt.Errorf("%s: %w", method, errConnClosed)
	default:
	}
	if err := c.write(map[string]any{"jsonrpc": "2.0", "method": method, "id": id, "params": params}); err != nil {
		c.forget(id)
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: %w", method, errConnClosed)
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %w", method, m.Error)
		}
		if out != nil && len(m.Result) > 0 {
			if err := json.Unmarshal(m.Result, out); err != nil {
				return fmt.Errorf("%s: decode result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.forget(id)
		return fmt.Errorf("%s: %w", method, context.Cause(ctx))
	}
}

func (c *conn) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}
