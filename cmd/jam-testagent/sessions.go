package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/jam-dev/jam/internal/privatefile"
)

// sessionIDPattern is checked before an id from the wire is used in a path,
// so a hostile or buggy client cannot escape the state directory.
var sessionIDPattern = regexp.MustCompile(`^tas_[0-9a-f]{24}$`)

// errSessionNotFound reports a session id with no persisted file.
var errSessionNotFound = errors.New("session not found")

// turn is one completed prompt/reply exchange.
type turn struct {
	Prompt string `json:"prompt"`
	Reply  string `json:"reply"`
}

// sessionRecord is the on-disk shape of a session; it survives restarts so
// session/load and [[count]] behave like a real agent with memory.
type sessionRecord struct {
	ID        string    `json:"id"`
	Cwd       string    `json:"cwd"`
	CreatedAt time.Time `json:"created_at"`
	Turns     []turn    `json:"turns"`
}

// sessionStore persists sessions as <dir>/sessions/<id>.json.
type sessionStore struct {
	dir string
}

func newSessionStore(stateDir string) *sessionStore {
	return &sessionStore{dir: filepath.Join(stateDir, "sessions")}
}

func validSessionID(id string) bool {
	return sessionIDPattern.MatchString(id)
}

func newSessionID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "tas_" + hex.EncodeToString(b[:]), nil
}

func (s *sessionStore) path(id string) (string, error) {
	if !validSessionID(id) {
		return "", fmt.Errorf("invalid session id %q", id)
	}
	return filepath.Join(s.dir, id+".json"), nil
}

// save writes the record atomically (private temp file + rename) so a crash mid-write
// never leaves a truncated session behind.
func (s *sessionStore) save(rec *sessionRecord) error {
	final, err := s.path(rec.ID)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("create session dir: %w", err)
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := privatefile.Replace(final, append(data, '\n')); err != nil {
		return fmt.Errorf("save session %s: %w", rec.ID, err)
	}
	return nil
}

// load reads a persisted session; a missing file maps to errSessionNotFound.
func (s *sessionStore) load(id string) (*sessionRecord, error) {
	p, err := s.path(id)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errSessionNotFound
	}
	if err != nil {
		return nil, err
	}
	var rec sessionRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("decode session %s: %w", id, err)
	}
	if rec.ID != id {
		return nil, fmt.Errorf("session file %s holds id %q", p, rec.ID)
	}
	return &rec, nil
}
