package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/uuid"
)

// ErrNotRestorable: the generation is not Complete; nothing was written.
var ErrNotRestorable = errors.New("checkpoint is not complete")

// Restore replaces dest with a copy of a Complete generation's payload. Files are copied,
// never linked: the provider will write to them, and a generation never changes. The copy is
// made beside dest and renamed over it, so dest is either the old state or the whole new one.
func (s Store) Restore(id uuid.UUID, dest string) (Manifest, error) {
	in, err := s.Inspect(id)
	if err != nil {
		return Manifest{}, err
	}
	if in.Status != StatusComplete {
		return Manifest{}, fmt.Errorf("%w: checkpoint %s is %s (%s)", ErrNotRestorable, id, in.Status, in.Detail)
	}
	tmp := dest + ".restore-" + id.String()
	if err := os.RemoveAll(tmp); err != nil {
		return Manifest{}, err
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return Manifest{}, err
	}
	payload := filepath.Join(s.Root, id.String(), payloadDir)
	for _, f := range in.Manifest.Files {
		dst := filepath.Join(tmp, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return Manifest{}, err
		}
		if err := copyFile(filepath.Join(payload, filepath.FromSlash(f.Path)), dst, f.Size); err != nil {
			_ = os.RemoveAll(tmp)
			return Manifest{}, fmt.Errorf("restore checkpoint %s: %s: %w", id, f.Path, err)
		}
		// The owner's bits of the captured mode (an executable stays executable); nothing
		// restored is readable by others.
		if err := os.Chmod(dst, fs.FileMode(f.Mode)&0o700|0o600); err != nil {
			_ = os.RemoveAll(tmp)
			return Manifest{}, err
		}
	}
	old := dest + ".replaced-" + id.String()
	_ = os.RemoveAll(old)
	if err := os.Rename(dest, old); err != nil && !os.IsNotExist(err) {
		return Manifest{}, fmt.Errorf("restore checkpoint %s: %w", id, err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		_ = os.Rename(old, dest)
		return Manifest{}, fmt.Errorf("restore checkpoint %s: %w", id, err)
	}
	_ = os.RemoveAll(old)
	return in.Manifest, nil
}
