package app

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/jam-dev/jam/internal/privatefile"
)

// Token is the operator token and where it came from.
type Token struct {
	Value string
	// File is where it is stored, or "" when it came from the environment.
	File string
}

// OperatorToken returns the token from the environment value when set, else from the token
// file, which is created (mode 0600, directory 0700) with a fresh random token on first use.
func OperatorToken(envValue, file string) (Token, error) {
	if envValue != "" {
		return Token{Value: envValue}, nil
	}
	if b, err := os.ReadFile(file); err == nil {
		if err := checkPrivate(file); err != nil {
			return Token{}, err
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return Token{}, fmt.Errorf("operator token file %s is empty; delete it to generate a new token", file)
		}
		return Token{Value: v, File: file}, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Token{}, fmt.Errorf("read operator token %s: %w", file, err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return Token{}, fmt.Errorf("generate operator token: %w", err)
	}
	v := "jam_" + base64.RawURLEncoding.EncodeToString(raw)
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return Token{}, fmt.Errorf("create %s: %w", filepath.Dir(file), err)
	}
	// Written whole to a private temporary file, then linked into place: a reader never sees
	// a half-written token, a crash leaves no empty one, and of two processes starting at
	// once exactly one link succeeds.
	created, err := privatefile.Create(file, []byte(v+"\n"))
	if err != nil {
		return Token{}, fmt.Errorf("write operator token %s: %w", file, err)
	}
	if !created {
		return OperatorToken("", file)
	}
	return Token{Value: v, File: file}, nil
}

// checkPrivate refuses a token file that others can read: the token is full authority.
func checkPrivate(file string) error {
	st, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("operator token %s: %w", file, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("operator token %s is readable by others (mode %04o); run: chmod 600 %s", file, st.Mode().Perm(), file)
	}
	return nil
}
