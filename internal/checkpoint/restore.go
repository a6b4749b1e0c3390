package checkpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/uuid"
)

// ErrNotRestorable: the generation is not Complete; nothing was written.
var ErrNotRestorable = errors.New("checkpoint is not complete")

// ErrNotEmpty: the state directory holds files; a restore never overwrites live state.
var ErrNotEmpty = errors.New("state directory is not empty")

// Restore fills the empty state directory dest with a copy of a Complete generation's
// payload. Files are copied, never linked (the provider will write to them; a generation
// never changes). dest itself is never replaced — it may be a mount a sandbox captured — so
// the copy is staged beside it (unique per attempt) and its top-level entries are moved in,
// after checking once more that dest is still empty.
func (s Store) Restore(ctx context.Context, id uuid.UUID, dest string) (Manifest, error) {
	in, err := s.Inspect(id)
	if err != nil {
		return Manifest{}, err
	}
	if in.Status != StatusComplete {
		return Manifest{}, fmt.Errorf("%w: checkpoint %s is %s (%s)", ErrNotRestorable, id, in.Status, in.Detail)
	}
	if err := os.MkdirAll(dest, 0o700); err != nil {
		return Manifest{}, err
	}
	if err := emptyDir(dest); err != nil {
		return Manifest{}, err
	}
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	tmp := filepath.Join(filepath.Dir(dest), ".restore-"+id.String()+"-"+hex.EncodeToString(suffix))
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return Manifest{}, err
	}
	defer os.RemoveAll(tmp)
	payload := filepath.Join(s.Dir(id), payloadDir)
	for i, f := range in.Manifest.Files {
		if i%256 == 0 && ctx.Err() != nil {
			return Manifest{}, ctx.Err()
		}
		dst := filepath.Join(tmp, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return Manifest{}, err
		}
		if err := copyFile(filepath.Join(payload, filepath.FromSlash(f.Path)), dst, f.Size); err != nil {
			return Manifest{}, fmt.Errorf("restore checkpoint %s: %s: %w", id, f.Path, err)
		}
		// The owner's bits of the captured mode (an executable stays executable); nothing
		// restored is readable by others.
		if err := os.Chmod(dst, fs.FileMode(f.Mode)&0o700|0o600); err != nil {
			return Manifest{}, err
		}
	}
	if err := syncFS(tmp); err != nil {
		return Manifest{}, err
	}
	if err := emptyDir(dest); err != nil {
		return Manifest{}, err
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return Manifest{}, err
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(tmp, e.Name()), filepath.Join(dest, e.Name())); err != nil {
			return Manifest{}, fmt.Errorf("restore checkpoint %s: %w", id, err)
		}
	}
	return in.Manifest, nil
}

// emptyDir is nil when dir holds nothing, ErrNotEmpty when it holds something, and the read
// error otherwise (an unreadable directory is not an empty one).
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("%w: %s", ErrNotEmpty, dir)
	}
	return nil
}
