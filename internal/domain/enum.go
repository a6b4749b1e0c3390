// Package domain holds Jam's pure vocabulary: identifiers, enumerations with their wire names,
// validators and state machines. It does no I/O and imports nothing from the rest of Jam.
//
// Every enumeration's wire name (the string used in JSON and in the database) is written
// exactly once, in the constant block of its type; the Enum table beside it is the one list
// of legal values that parsers, validators, the OpenAPI document and the schema tests read.
package domain

import (
	"fmt"
	"slices"
	"strings"
)

// Enum is the table of the legal values of one string enumeration.
type Enum[T ~string] struct {
	name   string
	values []T
}

// NewEnum builds the table for the enumeration called name (used in error messages).
func NewEnum[T ~string](name string, values ...T) Enum[T] {
	return Enum[T]{name: name, values: values}
}

// Name is the enumeration's name, for messages and documents.
func (e Enum[T]) Name() string { return e.name }

// Values returns the legal values in declaration order.
func (e Enum[T]) Values() []T { return slices.Clone(e.values) }

// Strings returns the wire names in declaration order.
func (e Enum[T]) Strings() []string {
	out := make([]string, len(e.values))
	for i, v := range e.values {
		out[i] = string(v)
	}
	return out
}

// Has reports whether v is a legal value.
func (e Enum[T]) Has(v T) bool { return slices.Contains(e.values, v) }

// Parse returns the value whose wire name is s, or a *ValidationError naming the legal ones.
func (e Enum[T]) Parse(s string) (T, error) {
	v := T(s)
	if e.Has(v) {
		return v, nil
	}
	return "", &ValidationError{Field: e.name, Detail: fmt.Sprintf("must be one of %s", strings.Join(e.Strings(), ", "))}
}

// Index is the value's position in declaration order, or -1.
func (e Enum[T]) Index(v T) int { return slices.Index(e.values, v) }

// unmarshalEnum is the shared body of the UnmarshalText methods.
func unmarshalEnum[T ~string](e Enum[T], text []byte, dst *T) error {
	v, err := e.Parse(string(text))
	if err != nil {
		return err
	}
	*dst = v
	return nil
}
