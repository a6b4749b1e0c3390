package workspace

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

// restorePrefix names the private staging directories of restores, siblings of their
// destination. One left by a crash is never read; it is removed once it is stale.
const restorePrefix = ".restore-"

// staleRestore is the age after which a restore staging directory is abandoned.
const staleRestore = time.Hour

// RestoreWorkspace copies an export's workspace to dest, which must not exist
// (ErrDestinationExists otherwise, and dest is left untouched). The copy is staged in a
// private sibling directory, every file checked against the manifest's SHA-256 as it is
// copied (a mismatch is ErrExportCorrupt and nothing is restored), made durable, and only
// then renamed to dest.
func (e Exports) RestoreWorkspace(id uuid.UUID, dest string) error {
	return e.RestoreWorkspaceVia(id, dest, "")
}

// RestoreWorkspaceVia is RestoreWorkspace staging in stagingParent (on dest's filesystem)
// instead of beside dest: a destination inside a tree a sandbox mounts must not be staged
// where a guest could swap a staged directory for a symlink.
func (e Exports) RestoreWorkspaceVia(id uuid.UUID, dest, stagingParent string) error {
	m, err := e.Stat(id)
	if err != nil {
		return err
	}
	return e.restore(id, m, exportWorkspaceDir, dest, stagingParent)
}

// MatchesWorkspace reports whether dir holds exactly the export's workspace (every entry's
// type, size, SHA-256 and symlink target): a restore whose rename landed but whose answer
// was lost is recognised as done, not refused as an existing destination.
func (e Exports) MatchesWorkspace(id uuid.UUID, dir string) (bool, error) {
	m, err := e.Stat(id)
	if err != nil {
		return false, err
	}
	var want, got []ExportEntry
	for _, en := range m.Entries {
		if en.Path == exportWorkspaceDir || strings.HasPrefix(en.Path, exportWorkspaceDir+"/") {
			want = append(want, en)
		}
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		name := exportWorkspaceDir
		if rel != "." {
			name += "/" + filepath.ToSlash(rel)
		}
		if len(got) > len(want) {
			return errMismatch
		}
		switch {
		case d.IsDir():
			got = append(got, ExportEntry{Path: name, Type: EntryDir})
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			got = append(got, ExportEntry{Path: name, Type: EntrySymlink, Target: target})
		case d.Type().IsRegular():
			sum, size, err := hashFile(path)
			if err != nil {
				return err
			}
			got = append(got, ExportEntry{Path: name, Type: EntryFile, Size: size, SHA256: sum})
		default:
			return errMismatch
		}
		return nil
	})
	if errors.Is(err, errMismatch) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("export %s: compare %s: %w", id, dir, err)
	}
	return sameEntries(got, want, 0) == nil, nil
}

var errMismatch = errors.New("does not match")

func hashFile(path string) (string, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// RestoreCheckpoint copies an export's checkpoint generation to dest (that generation's
// directory) the same way. It reports whether it restored: an export without a checkpoint,
// or a dest that exists already (the generation is there; the caller verifies it), is
// (false, nil).
func (e Exports) RestoreCheckpoint(id uuid.UUID, dest string) (bool, error) {
	m, err := e.Stat(id)
	if err != nil {
		return false, err
	}
	if m.CheckpointID == nil {
		return false, nil
	}
	if _, err := os.Lstat(dest); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("export %s: restore checkpoint: %w", id, err)
	}
	err = e.restore(id, m, exportCheckpointDir, dest, "")
	if errors.Is(err, ErrDestinationExists) {
		return false, nil // it appeared meanwhile
	}
	return err == nil, err
}

func (e Exports) restore(id uuid.UUID, m ExportManifest, sub, dest, stagingParent string) error {
	if dest == "" {
		return fmt.Errorf("export %s: no restore destination", id)
	}
	dest = filepath.Clean(dest)
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("export %s: %w: %s", id, ErrDestinationExists, dest)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("export %s: restore: %w", id, err)
	}
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("export %s: restore: %w", id, err)
	}
	if stagingParent == "" {
		stagingParent = parent
	} else if err := os.MkdirAll(stagingParent, 0o700); err != nil {
		return fmt.Errorf("export %s: restore: %w", id, err)
	}
	cleanStaleRestores(stagingParent)

	var want []ExportEntry
	lim := ExportLimits{MaxDepth: 1}
	for _, en := range m.Entries {
		if en.Path == sub || strings.HasPrefix(en.Path, sub+"/") {
			want = append(want, en)
			lim.MaxEntries++
			lim.MaxBytes += en.Size
			lim.MaxDepth = max(lim.MaxDepth, strings.Count(en.Path, "/"))
		}
	}
	suffix := make([]byte, 12)
	_, _ = rand.Read(suffix)
	staging := filepath.Join(stagingParent, restorePrefix+hex.EncodeToString(suffix))
	// The bounds are the manifest's own: an export holding more than it lists is corrupt.
	c := newCopier(lim)
	c.start()
	err := c.tree(filepath.Join(e.dir(id), sub), staging, sub)
	got, skipped, werr := c.wait()
	if err == nil {
		err = werr
	}
	if err == nil {
		err = sameEntries(got, want, skipped)
	}
	if err == nil {
		err = syncFS(staging)
	}
	if err == nil {
		if err = renameNoReplace(staging, dest); errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("%w: %s", ErrDestinationExists, dest)
		}
	}
	if err == nil {
		err = syncDir(parent)
		if err != nil {
			return fmt.Errorf("export %s: restore %s: %w", id, sub, err)
		}
		return nil
	}
	_ = os.RemoveAll(staging)
	if errors.Is(err, ErrExportTooLarge) {
		err = fmt.Errorf("%w: %s holds more than its manifest lists", ErrExportCorrupt, sub)
	}
	return fmt.Errorf("export %s: restore %s: %w", id, sub, err)
}

// sameEntries compares what a restore copied (and hashed) with the manifest.
func sameEntries(got, want []ExportEntry, skipped int) error {
	if skipped > 0 {
		return fmt.Errorf("%w: the export holds special files", ErrExportCorrupt)
	}
	byPath := make(map[string]ExportEntry, len(got))
	for _, g := range got {
		byPath[g.Path] = g
	}
	for _, w := range want {
		g, ok := byPath[w.Path]
		switch {
		case !ok:
			return fmt.Errorf("%w: %s is missing", ErrExportCorrupt, w.Path)
		case g.Type != w.Type || g.Size != w.Size || g.SHA256 != w.SHA256 || g.Target != w.Target:
			return fmt.Errorf("%w: %s does not match the manifest", ErrExportCorrupt, w.Path)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("%w: the export holds entries its manifest does not list", ErrExportCorrupt)
	}
	return nil
}

// cleanStaleRestores removes restore staging directories abandoned in dir more than an hour
// ago (best effort: a restore in progress is younger).
func cleanStaleRestores(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, en := range entries {
		if !en.IsDir() || !strings.HasPrefix(en.Name(), restorePrefix) {
			continue
		}
		if info, err := en.Info(); err == nil && time.Since(info.ModTime()) > staleRestore {
			_ = os.RemoveAll(filepath.Join(dir, en.Name()))
		}
	}
}
