package provider

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// NotReadyError is the cause of a start handshake that ran out of its readiness bound; it
// matches ErrNotReady.
type NotReadyError struct {
	Who   string
	After time.Duration
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("%s did not finish its start handshake within %s", e.Who, e.After)
}

func (e *NotReadyError) Unwrap() error { return ErrNotReady }

// WithReadiness bounds a start handshake by ready (fallback when ready is 0), whatever the
// caller's own deadline: a provider that never answers must not hold a start for as long
// as the activity may run. who names the provider in the error.
func WithReadiness(ctx context.Context, ready, fallback time.Duration, who string) (context.Context, context.CancelFunc) {
	if ready <= 0 {
		ready = fallback
	}
	return context.WithTimeoutCause(ctx, ready, &NotReadyError{Who: who, After: ready})
}

// NotReady returns the readiness error when that is why ctx ended (nil otherwise): what the
// handshake call said about its own cancellation adds nothing to it.
func NotReady(ctx context.Context) error {
	var e *NotReadyError
	if errors.As(context.Cause(ctx), &e) {
		return e
	}
	return nil
}
