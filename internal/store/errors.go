package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/lib/pq"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/jam-dev/jam/internal/domain"
)

var (
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a unique or foreign-key constraint refused the write (a duplicate, a
	// cardinality rule such as one live Shared host per agent, or a dangling reference).
	ErrConflict = errors.New("conflict")
	// ErrConstraint: a CHECK constraint refused a value the domain validators let through.
	ErrConstraint = errors.New("constraint violated")
	// ErrInvalidTransition: a forward-only record refused a write (the domain's sentinel).
	ErrInvalidTransition = domain.ErrInvalidTransition
)

// ConstraintError names the constraint that refused a write; it matches ErrConflict,
// ErrNotFound or ErrConstraint by kind.
type ConstraintError struct {
	Kind       error
	Constraint string
	Err        error
}

func (e *ConstraintError) Error() string {
	if e.Constraint != "" {
		return fmt.Sprintf("%v (%s): %v", e.Kind, e.Constraint, e.Err)
	}
	return fmt.Sprintf("%v: %v", e.Kind, e.Err)
}

func (e *ConstraintError) Is(target error) bool { return target == e.Kind }
func (e *ConstraintError) Unwrap() error        { return e.Err }

// classify turns driver errors into the store's typed errors by their codes.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		switch pqErr.Code {
		case "23505": // unique_violation
			return &ConstraintError{Kind: ErrConflict, Constraint: pqErr.Constraint, Err: err}
		case "23503": // foreign_key_violation: a missing parent, or a delete of a referenced row
			return &ConstraintError{Kind: ErrConflict, Constraint: pqErr.Constraint, Err: err}
		case "23514", "23502": // check_violation, not_null_violation
			return &ConstraintError{Kind: ErrConstraint, Constraint: pqErr.Constraint, Err: err}
		}
		return err
	}
	var sqErr *sqlite.Error
	if errors.As(err, &sqErr) {
		switch sqErr.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return &ConstraintError{Kind: ErrConflict, Err: err}
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return &ConstraintError{Kind: ErrConflict, Err: err}
		case sqlite3.SQLITE_CONSTRAINT_CHECK, sqlite3.SQLITE_CONSTRAINT_NOTNULL:
			return &ConstraintError{Kind: ErrConstraint, Err: err}
		}
	}
	return err
}

// retryable reports whether a whole transaction may be run again: a serialization failure,
// deadlock or outdated prepared statement on Postgres, a busy or locked database on SQLite.
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, errStalePlan) {
		return true
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return pqErr.Code == "40001" || pqErr.Code == "40P01"
	}
	var sqErr *sqlite.Error
	if errors.As(err, &sqErr) {
		switch sqErr.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return false
}
