package main

// exitError is an error that ends the command with its own exit code, for scripts that
// must tell one outcome from another (jam room post --wait).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
