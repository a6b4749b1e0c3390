// Package client is a small Go client for Jam's REST API, used by the jam CLI and the
// cross-process tests.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
)

// Client calls one Jam API with one bearer token.
type Client struct {
	BaseURL string
	Token   string
	HTTP    *http.Client
}

// New returns a client for baseURL (e.g. http://127.0.0.1:7780).
func New(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token, HTTP: &http.Client{Timeout: 60 * time.Second}}
}

// Error is an API error response.
type Error struct {
	Status int
	Body   api.ErrorBody
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d %s)", e.Body.Message, e.Status, e.Body.Code)
	for _, v := range e.Body.Validations {
		fmt.Fprintf(&b, "\n  %s: %s", v.Field, v.Detail)
	}
	if e.Body.RequestID != "" && e.Status >= 500 {
		fmt.Fprintf(&b, "\n  request id: %s", e.Body.RequestID)
	}
	return b.String()
}

// Do sends in (when not nil) as JSON and decodes a 2xx response into out (when not nil).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	raw, err := c.DoRaw(ctx, method, path, in)
	if err != nil {
		return err
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}

// DoRaw is Do returning the raw body of a 2xx response.
func (c *Client) DoRaw(ctx context.Context, method, path string, in any) ([]byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the Jam API at %s (is `jam dev` running?): %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return raw, nil
	}
	apiErr := &Error{Status: resp.StatusCode}
	if json.Unmarshal(raw, &apiErr.Body) != nil || apiErr.Body.Code == "" {
		apiErr.Body = api.ErrorBody{Code: "http_" + fmt.Sprint(resp.StatusCode), Message: http.StatusText(resp.StatusCode)}
	}
	return nil, apiErr
}

// IsStatus reports whether err is an API error with the given status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// Event is one server-sent event of GET /v1/events.
type Event struct {
	ID   string
	Kind string
	Data api.EventBody
}

// Stream follows the event stream at path (e.g. /v1/events?room=…) from after (an event id,
// or "" for now), calling fn for each event, and reconnects with Last-Event-ID when the
// connection drops, until ctx ends or fn returns an error.
func (c *Client) Stream(ctx context.Context, path, after string, fn func(Event) error) error {
	delay := 250 * time.Millisecond
	for {
		err := c.streamOnce(ctx, path, &after, fn)
		var (
			apiErr *Error
			cbErr  *callbackError
		)
		switch {
		case ctx.Err() != nil, errors.Is(err, errStop):
			return nil
		case errors.As(err, &apiErr) && apiErr.Status < 500:
			return err
		case errors.As(err, &cbErr):
			return cbErr.err
		}
		// A dropped connection or a server error: resume after the last event seen.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

var (
	errStreamEnded = errors.New("event stream ended")
	errStop        = errors.New("stop")
)

type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

func (c *Client) streamOnce(ctx context.Context, path string, after *string, fn func(Event) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "text/event-stream")
	if *after != "" {
		req.Header.Set("Last-Event-ID", *after)
	}
	// The stream is long-lived: no client timeout, the context ends it.
	resp, err := (&http.Client{Transport: c.HTTP.Transport}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		apiErr := &Error{Status: resp.StatusCode}
		_ = json.Unmarshal(raw, &apiErr.Body)
		return apiErr
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var ev Event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.Kind = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &ev.Data); err != nil {
				return fmt.Errorf("decode event: %w", err)
			}
		case line == "" && ev.Kind != "":
			if err := fn(ev); err != nil {
				if errors.Is(err, ErrStopStream) {
					return errStop
				}
				return &callbackError{err}
			}
			if ev.ID != "" {
				*after = ev.ID
			}
			ev = Event{}
		}
	}
	return errStreamEnded
}

// ErrStopStream, returned by a Stream callback, ends the stream without an error.
var ErrStopStream = errors.New("stop the stream")

// Operation sends a request that starts a long operation (answered 202 with an
// api.OperationResource) and waits for it: its result is decoded into out, and a failed
// operation is returned as the *Error its route would have answered. progress, when not
// nil, sees the resource each time it is polled.
func (c *Client) Operation(ctx context.Context, method, path string, in, out any, progress func(api.OperationResource)) error {
	raw, err := c.DoRaw(ctx, method, path, in)
	if err != nil {
		return err
	}
	var op api.OperationResource
	if err := json.Unmarshal(raw, &op); err != nil {
		return fmt.Errorf("%s %s: decode operation: %w", method, path, err)
	}
	op, err = c.WaitOperation(ctx, op, progress)
	if err != nil {
		return err
	}
	if op.Status == domain.OperationFailed {
		return OperationError(op)
	}
	if out == nil || len(op.Result) == 0 {
		return nil
	}
	if err := json.Unmarshal(op.Result, out); err != nil {
		return fmt.Errorf("operation %s: decode result: %w", op.ID, err)
	}
	return nil
}

// WaitOperation polls GET /v1/operations/{id} (each poll waits server-side) until op is no
// longer running.
func (c *Client) WaitOperation(ctx context.Context, op api.OperationResource, progress func(api.OperationResource)) (api.OperationResource, error) {
	for op.Status == domain.OperationRunning {
		if progress != nil {
			progress(op)
		}
		if err := c.Do(ctx, http.MethodGet, "/v1/operations/"+op.ID.String()+"?wait=20s", nil, &op); err != nil {
			return op, err
		}
	}
	return op, nil
}

// OperationError is the error a failed operation's route would have answered.
func OperationError(op api.OperationResource) error {
	if op.Failure == nil {
		return &Error{Status: http.StatusBadGateway, Body: api.ErrorBody{Code: domain.CodeUpstream, Message: "the operation failed"}}
	}
	return &Error{Status: op.Failure.Status, Body: api.ErrorBody{Code: op.Failure.Code, Message: op.Failure.Message}}
}
