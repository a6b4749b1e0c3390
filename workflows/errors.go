package workflows

import (
	"errors"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
)

// HasAppErrType reports whether err carries an ApplicationError of type typ (validator
// rejections and activity failures alike).
func HasAppErrType(err error, typ string) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == typ
}

// IsRetired: an update was rejected because the session's room binding was removed.
func IsRetired(err error) bool { return HasAppErrType(err, ErrTypeRetired) }

// IsValidation: an update was rejected for its input.
func IsValidation(err error) bool { return HasAppErrType(err, ErrTypeValidation) }

// IsNoSession: no RoomSession workflow is running under that id.
func IsNoSession(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// RejectionText is the message a RoomSession validator gave; validators word it for people.
func RejectionText(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return "invalid request"
}
