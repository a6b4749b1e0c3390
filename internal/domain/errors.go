package domain

import (
	"errors"
	"fmt"
	"strings"
)

// ValidationError says one input field is unacceptable and why. Detail is safe to show a user.
type ValidationError struct {
	Field  string
	Detail string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Detail }

// Validations collects every field problem of one input, so a caller sees all of them at once.
type Validations []ValidationError

// Add records a problem with field.
func (v *Validations) Add(field, detail string) {
	*v = append(*v, ValidationError{Field: field, Detail: detail})
}

// AddErr records err under field: a *ValidationError keeps its detail, anything else its text.
func (v *Validations) AddErr(field string, err error) {
	var ve *ValidationError
	if errors.As(err, &ve) {
		v.Add(field, ve.Detail)
		return
	}
	v.Add(field, err.Error())
}

// Err returns nil when nothing was recorded, else the collection as an error.
func (v Validations) Err() error {
	if len(v) == 0 {
		return nil
	}
	return v
}

func (v Validations) Error() string {
	parts := make([]string, len(v))
	for i, e := range v {
		parts[i] = e.Field + ": " + e.Detail
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// AsValidations extracts field problems from err (a Validations or a single *ValidationError).
func AsValidations(err error) (Validations, bool) {
	var vs Validations
	if errors.As(err, &vs) {
		return vs, true
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		return Validations{*ve}, true
	}
	return nil, false
}

// ErrInvalidTransition marks a state or stage change that the forward-only rules refuse.
var ErrInvalidTransition = errors.New("invalid transition")

// TransitionError explains a refused transition; it matches ErrInvalidTransition.
type TransitionError struct {
	Record string // e.g. "workspace operation 1b4e…"
	Reason string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("%s: %s: %s", ErrInvalidTransition, e.Record, e.Reason)
}

func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }

// ErrAgentStopped marks an act of an agent its operator stopped (run intent stopped): an
// attached agent's key receives, settles and posts nothing until the agent is started; its
// inbound queue is kept meanwhile.
var ErrAgentStopped = errors.New("agent stopped")

// ErrPrecondition marks a request that is well formed but refused by the current state of
// the world (an owned agent without a template, a poster who is not in the room).
var ErrPrecondition = errors.New("precondition failed")

// PreconditionError says which precondition failed; Reason is safe to show a user.
type PreconditionError struct{ Reason string }

func (e *PreconditionError) Error() string { return "precondition failed: " + e.Reason }

func (e *PreconditionError) Unwrap() error { return ErrPrecondition }

// Refuse returns a PreconditionError.
func Refuse(format string, args ...any) error {
	return &PreconditionError{Reason: fmt.Sprintf(format, args...)}
}
