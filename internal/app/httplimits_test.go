package app

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/mocks"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/band"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/lifecycle"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
)

const limitsToken = "limits-operator-token"

// shortLimits make the read bounds short enough to outlast in a test.
var shortLimits = HTTPLimits{
	ReadHeaderTimeout: 300 * time.Millisecond,
	ReadTimeout:       600 * time.Millisecond,
	IdleTimeout:       time.Second,
}

// startLimitedAPI serves the real API handler through startAPI's http.Server on a free
// loopback port, over a SQLite store, with a mocked Temporal.
func startLimitedAPI(t *testing.T, limits HTTPLimits) *apiServer {
	t.Helper()
	st := teststore.SQLite(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec := &lifecycle.Recorder{}
	b := band.NewLocal(st, rec, log)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv, err := startAPI(api.Config{Store: st, Temporal: &mocks.Client{}, Band: b, Lifecycle: rec,
		Token: limitsToken, Version: "test", Logger: log}, "127.0.0.1:0", limits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.shutdown() })
	return srv
}

// A client that opens connections and trickles (part of a body, part of the headers, or
// nothing) holds none of them past the read bounds: the server closes each itself.
func TestAPIClosesConnectionsHoldingAPartialRequestWithinTheReadBound(t *testing.T) {
	srv := startLimitedAPI(t, shortLimits)
	addr := srv.listener.Addr().String()
	partialBody := "POST /v1/rooms HTTP/1.1\r\nHost: jam\r\nAuthorization: Bearer " + limitsToken +
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":"
	partialHeaders := "GET /healthz HTTP/1.1\r\nHost: jam\r\n"
	complete := "GET /healthz HTTP/1.1\r\nHost: jam\r\n\r\n"
	cases := []struct {
		name, send string
		bound      time.Duration
		served     bool
	}{
		{"partial body", partialBody, shortLimits.ReadTimeout, false},
		{"partial headers", partialHeaders, shortLimits.ReadHeaderTimeout, false},
		{"nothing sent", "", shortLimits.ReadHeaderTimeout, false},
		{"idle after a request", complete, shortLimits.IdleTimeout, true},
	}
	const perCase = 20
	const slack = 2 * time.Second
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conns := make([]net.Conn, perCase)
			for i := range conns {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { conn.Close() })
				if _, err := io.WriteString(conn, c.send); err != nil {
					t.Fatal(err)
				}
				conns[i] = conn
			}
			start := time.Now()
			for i, conn := range conns {
				_ = conn.SetReadDeadline(start.Add(c.bound + slack))
				got, err := io.ReadAll(conn) // nil at EOF: the server closed the connection
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("connection %d still open %s after it stopped sending (bound %s)", i, time.Since(start).Round(time.Millisecond), c.bound)
				}
				if ok := strings.HasPrefix(string(got), "HTTP/1.1 200"); ok != c.served {
					t.Fatalf("connection %d: served %v, want %v: %q", i, ok, c.served, got)
				}
			}
			t.Logf("%d connections closed %s after they stopped sending (bound %s)", perCase, time.Since(start).Round(time.Millisecond), c.bound)
		})
	}
	// The server is still serving, and refuses a header block over its limit.
	resp, err := http.Get(srv.URL() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz after the trickling clients: %d", resp.StatusCode)
	}
	req, err := http.NewRequest(http.MethodGet, srv.URL()+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", strings.Repeat("x", 2*DefaultHTTPLimits().MaxHeaderBytes))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("oversized headers: %d, want 431", resp.StatusCode)
	}
}

// An event stream and an attached agent's long poll are held far longer than the read
// timeout: neither is cut off or canceled when it passes, and both deliver what is posted
// after it. (net/http lifts the read deadline once a request is read, when it starts the
// background read that notices a client going away; this holds it to that.)
func TestAPIEventStreamAndLongPollOutliveTheReadTimeout(t *testing.T) {
	// A long idle bound: the test's own client reuses its connections across the window.
	limits := shortLimits
	limits.IdleTimeout = time.Minute
	srv := startLimitedAPI(t, limits)
	ctx := context.Background()
	op := client.New(srv.URL(), limitsToken)
	var room api.RoomBody
	var agent api.AgentBody
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(op.Do(ctx, http.MethodPost, "/v1/rooms", api.CreateRoomRequest{Name: "lab"}, &room))
	human := "ada"
	must(op.Do(ctx, http.MethodPost, "/v1/rooms/"+room.ID.String()+"/participants", api.AddParticipantRequest{Human: &human}, nil))
	must(op.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "helper", Kind: domain.AgentAttached}, &agent))
	agentID := agent.ID.String()
	must(op.Do(ctx, http.MethodPost, "/v1/rooms/"+room.ID.String()+"/participants", api.AddParticipantRequest{AgentID: &agentID}, nil))

	// The event stream: every line it sends, until it ends.
	req, err := http.NewRequest(http.MethodGet, srv.URL()+"/v1/events?room="+room.ID.String(), nil)
	must(err)
	req.Header.Set("Authorization", "Bearer "+limitsToken)
	resp, err := http.DefaultClient.Do(req)
	must(err)
	defer resp.Body.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	awaitLine := func(what, prefix string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the event stream ended before %s", what)
				}
				if strings.HasPrefix(l, prefix) {
					return
				}
			case <-deadline:
				t.Fatalf("no %s on the event stream within 5 s", what)
			}
		}
	}
	awaitLine("open frame", "event: "+string(domain.StreamOpen))

	// The long poll, waiting well past the read timeout.
	type received struct {
		body api.ReceiveBody
		err  error
		took time.Duration
	}
	polled := make(chan received, 1)
	pollStart := time.Now()
	go func() {
		var r received
		wait := 10
		r.err = client.New(srv.URL(), agent.APIKey).Do(ctx, http.MethodPost, "/v1/agents/"+agentID+"/receive",
			api.ReceiveRequest{WaitSeconds: &wait}, &r.body)
		r.took = time.Since(pollStart)
		polled <- r
	}()

	// Watch both through three read timeouts: neither may end.
	window := 3 * shortLimits.ReadTimeout
	windowEnd := time.After(window)
watch:
	for {
		select {
		case _, ok := <-lines:
			if !ok {
				t.Fatalf("the event stream ended %s after it opened (read timeout %s)", time.Since(pollStart).Round(time.Millisecond), shortLimits.ReadTimeout)
			}
		case r := <-polled:
			t.Fatalf("the long poll ended after %s, before its wait: %+v, %v", r.took, r.body, r.err)
		case <-windowEnd:
			break watch
		}
	}

	var posted api.MessageBody
	must(op.Do(ctx, http.MethodPost, "/v1/rooms/"+room.ID.String()+"/messages", api.PostMessageRequest{Text: "still there?"}, &posted))
	awaitLine("message_posted event", "event: "+string(domain.EventMessagePosted))
	select {
	case r := <-polled:
		if r.err != nil || r.body.Message == nil || r.body.Message.ID != posted.ID {
			t.Fatalf("long poll after %s: %+v, %v", r.took, r.body, r.err)
		}
		if r.took < window {
			t.Fatalf("the long poll answered after %s, before the message was posted", r.took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long poll did not deliver the message within 5 s")
	}
}
