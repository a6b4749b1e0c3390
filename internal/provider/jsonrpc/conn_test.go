package jsonrpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// peer is the other end of a connection under test: it reads what Jam writes and writes
// what a provider would, in the connection's framing.
type peer struct {
	t       *testing.T
	framing Framing
	out     *io.PipeWriter // the peer's output: Jam's input
	in      *bufio.Reader  // what Jam wrote
	tp      *textproto.Reader
}

// frame is one message in f, as the peer writes it.
func frame(f Framing, body string) string {
	if f == ContentLength {
		return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
	}
	return body + "\n"
}

func (p *peer) send(body string) { p.raw(frame(p.framing, body)) }

func (p *peer) raw(s string) {
	p.t.Helper()
	_, err := io.WriteString(p.out, s)
	require.NoError(p.t, err)
}

// recv reads one message Jam wrote, checking its framing.
func (p *peer) recv() map[string]any {
	p.t.Helper()
	var body []byte
	if p.framing == ContentLength {
		h, err := p.tp.ReadMIMEHeader()
		require.NoError(p.t, err)
		n, err := strconv.Atoi(h.Get("Content-Length"))
		require.NoError(p.t, err)
		body = make([]byte, n)
		_, err = io.ReadFull(p.in, body)
		require.NoError(p.t, err)
	} else {
		line, err := p.in.ReadBytes('\n')
		require.NoError(p.t, err)
		body = line
	}
	var m map[string]any
	require.NoError(p.t, json.Unmarshal(body, &m), "Jam wrote %q", body)
	return m
}

// connect is a connection in f with opts, and its peer.
func connect(t *testing.T, f Framing, opts Options) (*Conn, *peer) {
	t.Helper()
	jamIn, peerOut := io.Pipe()
	peerIn, jamOut := io.Pipe()
	opts.Framing = f
	c := New(jamIn, jamOut, opts)
	br := bufio.NewReader(peerIn)
	p := &peer{t: t, framing: f, out: peerOut, in: br, tp: textproto.NewReader(br)}
	t.Cleanup(func() {
		_ = peerOut.Close()
		_ = peerIn.Close()
	})
	return c, p
}

// call runs c.Call on its own goroutine; its error arrives on the channel.
func call(c *Conn, ctx context.Context, method string, out any) <-chan error {
	done := make(chan error, 1)
	go func() { done <- c.Call(ctx, method, map[string]any{"x": 1}, out) }()
	return done
}

func result(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not return")
		return nil
	}
}

var framings = []struct {
	name        string
	framing     Framing
	omitVersion bool
}{
	{"newline-delimited without the version member", Lines, true},
	{"Content-Length with the version member", ContentLength, false},
}

func TestACallGetsTheAnswerWithItsIDInEitherFraming(t *testing.T) {
	t.Parallel()
	for _, tc := range framings {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, p := connect(t, tc.framing, Options{OmitVersion: tc.omitVersion})
			var out struct{ Thread string }
			done := call(c, context.Background(), "thread/start", &out)
			req := p.recv()
			assert.Equal(t, "thread/start", req["method"])
			_, hasVersion := req["jsonrpc"]
			assert.Equal(t, !tc.omitVersion, hasVersion, "the version member is written only where the peer wants it")
			p.send(fmt.Sprintf(`{"id":%v,"result":{"thread":"t1"}}`, req["id"]))
			require.NoError(t, result(t, done))
			assert.Equal(t, "t1", out.Thread)
		})
	}
}

func TestThePeersErrorAnswerIsAnError(t *testing.T) {
	t.Parallel()
	for _, tc := range framings {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, p := connect(t, tc.framing, Options{OmitVersion: tc.omitVersion, Peer: "codex"})
			done := call(c, context.Background(), "turn/start", nil)
			req := p.recv()
			p.send(fmt.Sprintf(`{"id":%v,"error":{"code":-32001,"message":"overloaded"}}`, req["id"]))
			err := result(t, done)
			var rerr *Error
			require.ErrorAs(t, err, &rerr)
			assert.Equal(t, -32001, rerr.Code)
			assert.Contains(t, err.Error(), "codex")
		})
	}
}

// Input a provider should never send is skipped, reported and counted; the answer after it
// still reaches its call. An oversized Content-Length frame is skipped unread (its length is
// known), an oversized line without being buffered whole.
func TestGarbageIsReportedAndSkippedAndTheConnectionGoesOn(t *testing.T) {
	t.Parallel()
	const max = 64
	huge := `{"method":"x","params":"` + strings.Repeat("y", 4*max) + `"}`
	cases := []struct {
		name    string
		framing Framing
		garbage string
		reason  string
	}{
		{"a line that is not JSON", Lines, "{not json\n", "not JSON"},
		{"a line above the bound", Lines, huge + "\n", "too long"},
		{"a JSON line that is no message", Lines, "[1,2]\n", "not a message"},
		{"a frame that is not JSON", ContentLength, frame(ContentLength, "{not json"), "not JSON"},
		{"a frame above the bound", ContentLength, frame(ContentLength, huge), "too long"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var seen []string
			c, p := connect(t, tc.framing, Options{Max: max, Handlers: Handlers{Garbage: func(g *provider.Garbage) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, g.Reason)
			}}})
			done := call(c, context.Background(), "m", nil)
			req := p.recv()
			p.raw(tc.garbage)
			p.send(fmt.Sprintf(`{"id":%v,"result":{}}`, req["id"]))
			require.NoError(t, result(t, done))
			assert.EqualValues(t, 1, c.Garbage())
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{tc.reason}, seen)
			select {
			case <-c.Done():
				t.Fatal("garbage closed the connection")
			default:
			}
		})
	}
}

// A Content-Length header that cannot be read leaves the stream out of step: the
// connection closes, and the call waiting fails saying why.
func TestAnUnreadableFrameHeaderClosesTheConnectionCleanly(t *testing.T) {
	t.Parallel()
	c, p := connect(t, ContentLength, Options{})
	done := call(c, context.Background(), "connect", nil)
	p.recv()
	p.raw("Content-Length: many\r\n\r\n{}")
	err := result(t, done)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, err, ErrFrame)
	<-c.Done()
	require.ErrorIs(t, c.Call(context.Background(), "again", nil, nil), ErrClosed)
}

func TestPendingCallsFailWhenThePeerCloses(t *testing.T) {
	t.Parallel()
	for _, tc := range framings {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, p := connect(t, tc.framing, Options{OmitVersion: tc.omitVersion})
			first, second := call(c, context.Background(), "a", nil), call(c, context.Background(), "b", nil)
			p.recv()
			p.recv()
			require.NoError(t, p.out.Close())
			assert.ErrorIs(t, result(t, first), ErrClosed)
			assert.ErrorIs(t, result(t, second), ErrClosed)
			<-c.Done()
			assert.NotErrorIs(t, result(t, call(c, context.Background(), "c", nil)), ErrFrame, "the plain end of the stream")
		})
	}
}

func TestACancelledCallIsForgottenAndItsLateAnswerDropped(t *testing.T) {
	t.Parallel()
	for _, tc := range framings {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, p := connect(t, tc.framing, Options{OmitVersion: tc.omitVersion})
			ctx, cancel := context.WithCancelCause(context.Background())
			why := errors.New("the turn was interrupted")
			done := call(c, ctx, "slow", nil)
			req := p.recv()
			cancel(why)
			require.ErrorIs(t, result(t, done), why, "the call says why it stopped waiting")
			assert.Zero(t, c.pendingCalls())
			// The late answer finds nobody; the next call still gets its own.
			p.send(fmt.Sprintf(`{"id":%v,"result":{"late":true}}`, req["id"]))
			var out map[string]any
			next := call(c, context.Background(), "next", &out)
			req = p.recv()
			p.send(fmt.Sprintf(`{"id":%v,"result":{"late":false}}`, req["id"]))
			require.NoError(t, result(t, next))
			assert.Equal(t, false, out["late"])
		})
	}
}

func TestServerRequestsAreAnsweredOnTheirOwnGoroutine(t *testing.T) {
	t.Parallel()
	for _, tc := range framings {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			_, p := connect(t, tc.framing, Options{OmitVersion: tc.omitVersion, Handlers: Handlers{
				Request: func(method string, params json.RawMessage) (any, *Error) {
					if method == "approval" {
						<-release // a person deciding: the reader goes on meanwhile
						return map[string]any{"decision": "accept"}, nil
					}
					return nil, &Error{Code: CodeInvalidParams, Message: "no"}
				},
			}})
			p.send(`{"id":"a1","method":"approval","params":{}}`)
			p.send(`{"id":7,"method":"other","params":{}}`)
			refused := p.recv()
			assert.Equal(t, "7", fmt.Sprint(refused["id"]), "the second request was answered while the first waited")
			assert.EqualValues(t, CodeInvalidParams, refused["error"].(map[string]any)["code"])
			close(release)
			accepted := p.recv()
			assert.Equal(t, "a1", accepted["id"])
			assert.Equal(t, map[string]any{"decision": "accept"}, accepted["result"])
			_, hasVersion := accepted["jsonrpc"]
			assert.Equal(t, !tc.omitVersion, hasVersion)
		})
	}
}

func TestAServerRequestWithoutAHandlerIsDeclined(t *testing.T) {
	t.Parallel()
	_, p := connect(t, ContentLength, Options{})
	p.send(`{"jsonrpc":"2.0","id":3,"method":"hooks.invoke","params":{}}`)
	ans := p.recv()
	assert.EqualValues(t, CodeMethodNotFound, ans["error"].(map[string]any)["code"])
	assert.Contains(t, ans["error"].(map[string]any)["message"], "hooks.invoke")
}

func TestNotificationsArriveInOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range framings {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []string
			_, p := connect(t, tc.framing, Options{OmitVersion: tc.omitVersion, Handlers: Handlers{
				Notify: func(method string, params json.RawMessage) {
					mu.Lock()
					defer mu.Unlock()
					got = append(got, method+string(params))
				},
			}})
			var want []string
			for i := range 50 {
				p.send(fmt.Sprintf(`{"method":"n","params":%d}`, i))
				want = append(want, fmt.Sprintf("n%d", i))
			}
			wait.Eventually(t, 5*time.Second, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) == len(want)
			}, "all notifications delivered")
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, want, got)
		})
	}
}

// A process that exited may leave its output open (a grandchild holding it): Close fails
// the calls waiting at once, saying why.
func TestCloseFailsTheCallsWaitingWithItsCause(t *testing.T) {
	t.Parallel()
	c, p := connect(t, Lines, Options{})
	done := call(c, context.Background(), "slow", nil)
	p.recv()
	gone := errors.New("the process exited")
	c.Close(gone)
	err := result(t, done)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, err, gone)
	require.ErrorIs(t, c.Call(context.Background(), "later", nil, nil), ErrClosed)
}
