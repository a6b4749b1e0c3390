// Package checkpoint keeps immutable generations of a provider's continuity state on a node.
// A generation is a directory per checkpoint UUID: the payload the adapter chose to capture,
// then — only once every byte is in place with private permissions — an immutable
// complete.json manifest with a metadata checksum. A generation without complete.json is
// Incomplete and is never selected. Because generations never change, a file that did not
// change since the previous generation is hard-linked from it instead of copied: the cost of
// a checkpoint grows with the bytes that changed, not with the size of the provider state.
package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// ManifestVersion is the complete.json format this code writes and reads.
const ManifestVersion = 1

// manifestName marks a published generation.
const manifestName = "complete.json"

// payloadDir holds the captured files of a generation.
const payloadDir = "payload"

// Limits bound one capture (the reference's publication bounds).
type Limits struct {
	MaxFiles int
	MaxBytes int64
	MaxDepth int
}

// DefaultLimits: 100,000 files, 20 GiB, depth 64.
var DefaultLimits = Limits{MaxFiles: 100_000, MaxBytes: 20 << 30, MaxDepth: 64}

// ErrTooLarge: the state to capture exceeds the limits; nothing was published.
var ErrTooLarge = errors.New("provider state exceeds the checkpoint limits")

// ErrConflict: a published generation exists under the UUID with different metadata.
var ErrConflict = errors.New("a different checkpoint was published under this id")

// Session is a runtime session a generation carries state for, with the provider identity
// it is bound to.
type Session struct {
	RuntimeSession    uuid.UUID `json:"runtime_session"`
	ProviderSessionID string    `json:"provider_session_id"`
}

// File is one captured file, described by metadata only (no content hash: reading every byte
// would make a checkpoint cost grow with the size of the state).
type File struct {
	Path    string `json:"path"`
	Mode    uint32 `json:"mode"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"mod_time_ns"`
	// Linked: taken from the previous generation (unchanged), not copied.
	Linked bool `json:"linked,omitempty"`
}

// Meta is what the caller says about a generation.
type Meta struct {
	ID              uuid.UUID               `json:"id"`
	Host            uuid.UUID               `json:"runtime_host"`
	Reason          domain.CheckpointReason `json:"reason"`
	Provider        domain.Provider         `json:"provider"`
	ProviderVersion string                  `json:"provider_version"`
	Sessions        []Session               `json:"sessions"`
}

// Manifest is complete.json.
type Manifest struct {
	Version int `json:"version"`
	Meta
	Files     []File    `json:"files"`
	Bytes     int64     `json:"bytes"`
	CreatedAt time.Time `json:"created_at"`
	// Checksum is the SHA-256 of the manifest with this field empty.
	Checksum string `json:"checksum"`
}

func (m Manifest) checksum() string {
	m.Checksum = ""
	b, _ := json.Marshal(m)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func jsonIndent(m Manifest) ([]byte, error) { return json.MarshalIndent(m, "", "  ") }

// localPath: a clean, relative, slash-separated path that stays inside its root.
func localPath(p string) bool {
	return p != "" && filepath.IsLocal(filepath.FromSlash(p)) && filepath.ToSlash(filepath.Clean(filepath.FromSlash(p))) == p
}

// Status is what inspection concludes about one generation.
type Status string

const (
	StatusComplete   Status = "complete"
	StatusIncomplete Status = "incomplete"
	StatusCorrupt    Status = "corrupt"
	StatusMissing    Status = "missing"
)

// Store keeps one runtime host's generations in Root (<host root>/checkpoints).
type Store struct {
	Root string
}

func (s Store) dir(id uuid.UUID) (string, error) {
	if id == uuid.Nil {
		return "", &domain.ValidationError{Field: "checkpoint", Detail: "must be a UUID"}
	}
	return filepath.Join(s.Root, id.String()), nil
}

// Dir is the directory of one generation (its payload and complete.json).
func (s Store) Dir(id uuid.UUID) string { return filepath.Join(s.Root, id.String()) }

// Inspection is the verdict on one generation.
type Inspection struct {
	Status   Status
	Manifest Manifest
	Detail   string
}

// Inspect reads a generation's manifest and checks it against its payload by metadata:
// complete.json must parse and carry its own checksum, and every listed file must exist with
// its size and mode. Without complete.json the generation is Incomplete.
func (s Store) Inspect(id uuid.UUID) (Inspection, error) {
	dir, err := s.dir(id)
	if err != nil {
		return Inspection{}, err
	}
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	switch {
	case errors.Is(err, os.ErrNotExist):
		if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
			return Inspection{Status: StatusMissing, Detail: "no such generation"}, nil
		}
		return Inspection{Status: StatusIncomplete, Detail: "staged but never published"}, nil
	case err != nil:
		return Inspection{}, fmt.Errorf("checkpoint %s: %w", id, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil || m.Version != ManifestVersion {
		return Inspection{Status: StatusCorrupt, Detail: "complete.json is unreadable"}, nil
	}
	if m.Checksum == "" || m.Checksum != m.checksum() || m.ID != id {
		return Inspection{Status: StatusCorrupt, Manifest: m, Detail: "complete.json does not match its checksum"}, nil
	}
	for _, f := range m.Files {
		if !localPath(f.Path) {
			return Inspection{Status: StatusCorrupt, Manifest: m, Detail: "complete.json names a path outside its payload"}, nil
		}
		st, err := os.Lstat(filepath.Join(dir, payloadDir, filepath.FromSlash(f.Path)))
		if err != nil || !st.Mode().IsRegular() || st.Size() != f.Size {
			return Inspection{Status: StatusCorrupt, Manifest: m, Detail: "payload file " + f.Path + " is missing or changed"}, nil
		}
	}
	return Inspection{Status: StatusComplete, Manifest: m}, nil
}
