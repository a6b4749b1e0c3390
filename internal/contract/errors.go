package contract

import (
	"errors"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/jam-dev/jam/internal/domain"
)

// Fail is the one constructor of an error that crosses Temporal: an ApplicationError of
// type t, non-retryable when the error table says retrying cannot fix it. msg should be
// worded for people when t's class is Worded (the API shows it). details travel with it
// (a refused cleanup carries its report).
func Fail(msg string, t domain.ErrorType, cause error, details ...any) error {
	return temporal.NewApplicationErrorWithOptions(msg, string(t), temporal.ApplicationErrorOptions{
		NonRetryable: !t.Retryable(), Cause: cause, Details: details})
}

// Is reports whether err carries an ApplicationError of type t (under its current or its
// legacy name), whether raised by an activity, a validator or a workflow.
func Is(err error, t domain.ErrorType) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && t.Matches(app.Type())
}

// Classify finds err's row in the error table and the message its raiser gave.
func Classify(err error) (domain.ErrorClass, string, bool) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		return domain.ErrorClass{}, "", false
	}
	c, ok := domain.ErrorClassOf(app.Type())
	return c, app.Message(), ok
}

// Retry returns p with every error type the table calls non-retryable added, so no retry
// policy lists them by hand.
func Retry(p temporal.RetryPolicy) *temporal.RetryPolicy {
	p.NonRetryableErrorTypes = domain.NonRetryableErrorTypes()
	return &p
}

// IsNotFound: no workflow (or update) is running under that id.
func IsNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// RejectionText is the message a validator or activity gave; for Worded error classes it
// is worded for people.
func RejectionText(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return "invalid request"
}

// Classified reports whether err carries an error the table declares.
func Classified(err error) bool {
	_, _, ok := Classify(err)
	return ok
}
