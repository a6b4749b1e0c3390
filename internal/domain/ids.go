package domain

import (
	"time"

	"github.com/google/uuid"
)

// ParseID parses a UUID in its canonical lowercase 36-character form only. Paths and
// workflow ids are derived from ids, so alternative spellings (braces, urn:, upper case)
// that name the same UUID are refused rather than normalised.
func ParseID(field, s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil || id.String() != s || id == uuid.Nil {
		return uuid.Nil, &ValidationError{Field: field, Detail: "must be a lowercase UUID"}
	}
	return id, nil
}

// Timestamp normalises a time for storage and comparison: UTC, microsecond precision (the
// finest both Postgres and Go agree on), so a value read back equals the value written.
func Timestamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
