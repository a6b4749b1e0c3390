package codex

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"

	"github.com/jam-dev/jam/internal/provider"
)

// Codex app-server speaks JSON-RPC 2.0 shapes over newline-delimited JSON on stdio, without
// the "jsonrpc" member: requests {method, id, params}, responses {id, result | error},
// notifications {method, params}. The server sends requests of its own (tool calls,
// approvals) in a separate id space.

// codeOverloaded is the app-server's "server overloaded; retry" error code.
const codeOverloaded = -32001

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("codex error %d: %s", e.Code, e.Message) }

// message is any line on the wire.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

// errConnClosed: the app-server's stdout ended.
var errConnClosed = errors.New("codex app-server connection closed")

// conn is one app-server connection.
type conn struct {
	w   io.Writer
	log *slog.Logger
	// onNotify runs on the reader goroutine for each notification, in order.
	onNotify func(method string, params json.RawMessage)
	// onRequest answers a server request; it runs on its own goroutine (an approval waits
	// for a decision) and returns the result or an error.
	onRequest func(method string, params json.RawMessage) (any, *rpcError)

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

// serve reads lines until r ends, dispatching responses, notifications and requests.
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
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), provider.MaxProtocolLine+1)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			c.log.Warn("codex sent a line that is not JSON", "error", err)
			continue
		}
		switch {
		case m.Method != "" && len(m.ID) > 0:
			go c.answer(m)
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

func (c *conn) answer(m message) {
	var (
		result any
		rerr   *rpcError
	)
	if c.onRequest == nil {
		rerr = &rpcError{Code: -32601, Message: "method not found"}
	} else {
		result, rerr = c.onRequest(m.Method, m.Params)
	}
	out := map[string]any{"id": m.ID}
	if rerr != nil {
		out["error"] = rerr
	} else {
		out["result"] = result
	}
	if err := c.write(out); err != nil {
		c.log.Debug("codex: answering a server request failed", "method", m.Method, "error", err)
	}
}

func (c *conn) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.w.Write(append(b, '\n'))
	return err
}

// notify sends a notification.
func (c *conn) notify(method string, params any) error {
	m := map[string]any{"method": method}
	if params != nil {
		m["params"] = params
	}
	return c.write(m)
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
		return fmt.Errorf("%s: %w", method, errConnClosed)
	default:
	}
	if err := c.write(map[string]any{"method": method, "id": id, "params": params}); err != nil {
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
