// Package jsonrpc is the JSON-RPC 2.0 client the JSON-RPC adapters share (Codex app-server,
// Copilot SDK server): calls wait for their response by id, the peer's notifications are
// delivered in order on the reader goroutine, and its requests are answered each on a
// goroutine of its own (an approval waits for a person). Two framings: newline-delimited
// and Content-Length. Input that is too long or not JSON is logged, counted, reported to
// an optional hook and skipped, never fatal; the end of the stream (or a Content-Length
// header that cannot be read, after which the stream is out of step) closes the connection
// and fails every call still waiting with ErrClosed. Process and Pool keep the provider
// process behind a connection, shared by the runtimes of a Shared runtime host.
package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/jam-dev/jam/internal/provider"
)

// Error is a JSON-RPC error object, the peer's answer to a call or Jam's to a request.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("error %d: %s", e.Code, e.Message) }

// Standard error codes.
const (
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
)

// ErrClosed: the connection's reader stopped (the peer's output ended or went out of step).
var ErrClosed = errors.New("connection closed")

// Handlers receive what the peer sends on its own.
type Handlers struct {
	// Notify runs on the reader goroutine for each notification, in order; it must not
	// block on a call of the same connection.
	Notify func(method string, params json.RawMessage)
	// Request answers a peer request, on a goroutine of its own; nil declines every one
	// with method-not-found.
	Request func(method string, params json.RawMessage) (any, *Error)
	// Garbage is told each message dropped (too long, not JSON), after it was logged.
	Garbage func(g *provider.Garbage)
}

// Options configure a connection.
type Options struct {
	Framing Framing
	// OmitVersion leaves the "jsonrpc":"2.0" member out of what Jam writes (the Codex
	// app-server neither sends nor wants it); Jam accepts messages with or without it.
	OmitVersion bool
	// Max bounds one message; 0 is provider.MaxProtocolLine.
	Max int
	// Peer names the peer in errors and logs ("codex app-server").
	Peer string
	Log  *slog.Logger
	Handlers
}

// Conn is one JSON-RPC connection over a reader and a writer (a child's stdout and stdin).
type Conn struct {
	w    io.Writer
	opts Options
	log  *slog.Logger

	wmu     sync.Mutex
	mu      sync.Mutex
	next    int64
	pending map[int64]chan message
	done    chan struct{}
	// cause is why the connection closed (set before done closes).
	cause     error
	closeOnce sync.Once
	garbage   atomic.Int64
}

// message is any message on the wire.
type message struct {
	JSONRPC string          `json:"jsonrpc,omitempty"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// New starts a connection reading r and writing w; it runs until r ends.
func New(r io.Reader, w io.Writer, opts Options) *Conn {
	if opts.Max <= 0 {
		opts.Max = provider.MaxProtocolLine
	}
	if opts.Peer == "" {
		opts.Peer = "peer"
	}
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	c := &Conn{w: w, opts: opts, log: log, pending: map[int64]chan message{}, done: make(chan struct{})}
	var fr frameReader
	switch opts.Framing {
	case ContentLength:
		fr = newFrameDecoder(r, opts.Max)
	default:
		fr = provider.NewLineReader(r, opts.Max)
	}
	go c.serve(fr)
	return c
}

// Done is closed once the connection closed: its reader stopped, or Close.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Garbage is how many messages were dropped so far.
func (c *Conn) Garbage() int64 { return c.garbage.Load() }

// Close ends the connection for Jam: every call waiting fails with ErrClosed (and cause,
// when not nil), and so does every later one. The reader stops when its input ends.
func (c *Conn) Close(cause error) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.cause = cause
		for id, ch := range c.pending {
			close(ch)
			delete(c.pending, id)
		}
		c.mu.Unlock()
		close(c.done)
	})
}

func (c *Conn) serve(fr frameReader) {
	var cause error
	defer func() { c.Close(cause) }()
	for {
		b, err := fr.Next()
		var g *provider.Garbage
		switch {
		case errors.As(err, &g):
			c.skipped(g)
			continue
		case err != nil:
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				c.log.Warn(c.opts.Peer+" connection dropped", "error", err)
				cause = err
			}
			return
		}
		var m message
		if json.Unmarshal(b, &m) != nil {
			// Valid JSON that is not a message object (an array, a string).
			c.skipped(provider.NewGarbage("not a message", b))
			continue
		}
		switch {
		case m.Method != "" && len(m.ID) > 0:
			go c.answer(m)
		case m.Method != "":
			if c.opts.Notify != nil {
				c.opts.Notify(m.Method, m.Params)
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

// skipped reports a message dropped: logged, counted and told to the hook.
func (c *Conn) skipped(g *provider.Garbage) {
	c.garbage.Add(1)
	c.log.Warn(c.opts.Peer+" sent a message Jam skips", "reason", g.Reason, "bytes", g.Bytes, "prefix", g.Prefix)
	if c.opts.Garbage != nil {
		c.opts.Garbage(g)
	}
}

// answer runs the request handler and writes its answer.
func (c *Conn) answer(m message) {
	var (
		result any
		rerr   *Error
	)
	if c.opts.Request == nil {
		rerr = &Error{Code: CodeMethodNotFound, Message: "Jam does not handle " + m.Method}
	} else {
		result, rerr = c.opts.Request(m.Method, m.Params)
	}
	out := c.envelope(map[string]any{"id": m.ID})
	if rerr != nil {
		out["error"] = rerr
	} else {
		out["result"] = result
	}
	if err := c.write(out); err != nil {
		c.log.Debug("answering a "+c.opts.Peer+" request failed", "method", m.Method, "error", err)
	}
}

// envelope adds the version member unless the peer does without it.
func (c *Conn) envelope(m map[string]any) map[string]any {
	if !c.opts.OmitVersion {
		m["jsonrpc"] = "2.0"
	}
	return m
}

func (c *Conn) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.opts.Framing == ContentLength {
		if _, err := fmt.Fprintf(c.w, "Content-Length: %d\r\n\r\n", len(b)); err != nil {
			return err
		}
		_, err = c.w.Write(b)
		return err
	}
	_, err = c.w.Write(append(b, '\n'))
	return err
}

// Notify sends a notification (params nil: none).
func (c *Conn) Notify(method string, params any) error {
	m := c.envelope(map[string]any{"method": method})
	if params != nil {
		m["params"] = params
	}
	if err := c.write(m); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// Call sends a request and decodes its result into out (nil discards it). The peer's error
// answer is an *Error; a closed connection ErrClosed. ctx bounds the wait: when it ends the
// call is forgotten (a late answer is dropped), though the request cannot be withdrawn.
func (c *Conn) Call(ctx context.Context, method string, params, out any) error {
	c.mu.Lock()
	id := c.next
	c.next++
	ch := make(chan message, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	select {
	case <-c.done:
		c.forget(id)
		return c.closed(method)
	default:
	}
	if err := c.write(c.envelope(map[string]any{"method": method, "id": id, "params": params})); err != nil {
		c.forget(id)
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return c.closed(method)
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %s %w", method, c.opts.Peer, m.Error)
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

// closed is a call's error on a closed connection, with why it closed when that was not
// the plain end of the stream.
func (c *Conn) closed(method string) error {
	c.mu.Lock()
	cause := c.cause
	c.mu.Unlock()
	if cause != nil {
		return fmt.Errorf("%s: %s %w: %w", method, c.opts.Peer, ErrClosed, cause)
	}
	return fmt.Errorf("%s: %s %w", method, c.opts.Peer, ErrClosed)
}

func (c *Conn) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// pendingCalls is how many calls wait for an answer (tests).
func (c *Conn) pendingCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}
