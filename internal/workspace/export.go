package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/jam-dev/jam/internal/domain"
)

// An export is one immutable directory <data>/workspace-exports/<id>:
//
//	manifest.json   every entry below, the owner triple, the checkpoint id and a checksum
//	workspace/      a copy of the session workspace
//	checkpoint/     a copy of the checkpoint generation taken with it (when there is one)
//
// It is staged in .<id>.partial, made durable, and only then renamed to <id>: a directory
// named by the UUID is always complete. Files are copied (reflinked where the filesystem
// can), never hard-linked, so nothing a guest later does to its workspace reaches an export.

// ExportManifestVersion is the manifest.json format this code writes and reads.
const ExportManifestVersion = 1

const (
	exportManifestName  = "manifest.json"
	exportWorkspaceDir  = "workspace"
	exportCheckpointDir = "checkpoint"
	// maxManifestBytes bounds the manifest read back (200,000 entries fit well within it).
	maxManifestBytes = 256 << 20
)

// Entry types of an export manifest.
const (
	EntryDir     = "dir"
	EntryFile    = "file"
	EntrySymlink = "symlink"
)

var (
	// ErrExportMissing: no export under this id.
	ErrExportMissing = errors.New("workspace export is missing")
	// ErrExportCorrupt: the export's manifest is unreadable or does not match its own
	// checksum, or the bytes on disk differ from the manifest.
	ErrExportCorrupt = errors.New("workspace export is corrupt")
	// ErrExportConflict: an export exists under this id for another owner or checkpoint.
	ErrExportConflict = errors.New("a different workspace export exists under this id")
	// ErrExportTooLarge: the workspace exceeds the export limits; nothing was published.
	ErrExportTooLarge = errors.New("workspace exceeds the export limits")
	// ErrDestinationExists: a restore never writes over an existing directory.
	ErrDestinationExists = errors.New("restore destination exists")
)

// ExportLimits bound one export (the workspace and the checkpoint together).
type ExportLimits struct {
	MaxEntries int
	MaxBytes   int64
	MaxDepth   int
}

// DefaultExportLimits: 200,000 entries, 64 GiB, depth 64.
var DefaultExportLimits = ExportLimits{MaxEntries: 200_000, MaxBytes: 64 << 30, MaxDepth: 64}

// Exports keeps a node's workspace exports in Root (<data>/workspace-exports).
type Exports struct {
	Root string
	// Limits bound a Create; zero means DefaultExportLimits.
	Limits ExportLimits
}

// NewExports are the exports of a node's data directory.
func NewExports(l domain.Layout) Exports {
	return Exports{Root: filepath.Join(l.Root, "workspace-exports")}
}

// ExportOwner is the immutable owner triple an export proves.
type ExportOwner struct {
	Workspace uuid.UUID `json:"workspace"`
	Host      uuid.UUID `json:"runtime_host"`
	Session   uuid.UUID `json:"runtime_session"`
}

// ExportSource is what an export copies.
type ExportSource struct {
	// Workspace is the session workspace directory.
	Workspace string
	// CheckpointID is the checkpoint generation taken with the workspace (Nil: none) and
	// Checkpoint its directory ("" when none).
	CheckpointID uuid.UUID
	Checkpoint   string
}

// ExportEntry is one directory, file or symlink of an export, relative to the export
// directory ("workspace/...", "checkpoint/...").
type ExportEntry struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Mode   uint32 `json:"mode"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Target string `json:"target,omitempty"`
}

// ExportManifest is manifest.json.
type ExportManifest struct {
	Version      int           `json:"version"`
	ID           uuid.UUID     `json:"id"`
	Owner        ExportOwner   `json:"owner"`
	CheckpointID *uuid.UUID    `json:"checkpoint_id,omitempty"`
	Entries      []ExportEntry `json:"entries"`
	Files        int           `json:"files"`
	Dirs         int           `json:"dirs"`
	Symlinks     int           `json:"symlinks"`
	// Skipped counts special files (sockets, FIFOs, devices) that were not exported.
	Skipped int `json:"skipped"`
	// Bytes is the sum of the exported files' sizes.
	Bytes     int64     `json:"bytes"`
	CreatedAt time.Time `json:"created_at"`
	// Checksum is the SHA-256 (hex) of the compact JSON of the manifest with this field
	// empty.
	Checksum string `json:"checksum"`
}

func (m ExportManifest) checksum() string {
	m.Checksum = ""
	b, _ := json.Marshal(m)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (m ExportManifest) checkpoint() uuid.UUID {
	if m.CheckpointID == nil {
		return uuid.Nil
	}
	return *m.CheckpointID
}

func (e Exports) limits() ExportLimits {
	if e.Limits == (ExportLimits{}) {
		return DefaultExportLimits
	}
	return e.Limits
}

// dir is a committed export; partial its staging, deleting its tombstone, lockPath the
// lock that serialises Create and Remove of one id.
func (e Exports) dir(id uuid.UUID) string { return filepath.Join(e.Root, id.String()) }

func (e Exports) partial(id uuid.UUID) string { return e.hidden(id, ".partial") }

func (e Exports) deleting(id uuid.UUID) string { return e.hidden(id, ".deleting") }

func (e Exports) lockPath(id uuid.UUID) string { return e.hidden(id, ".lock") }

func (e Exports) hidden(id uuid.UUID, suffix string) string {
	return filepath.Join(e.Root, "."+id.String()+suffix)
}

// Dir is the directory of one export.
func (e Exports) Dir(id uuid.UUID) string { return e.dir(id) }

func validID(id uuid.UUID) error {
	if id == uuid.Nil {
		return &domain.ValidationError{Field: "export", Detail: "must be a UUID"}
	}
	return nil
}

// Create copies the source into a new export under id and returns its manifest. An exact
// retry of a committed export (same owner and checkpoint) returns it unchanged without
// reading the source; another owner or checkpoint under the id is ErrExportConflict. A
// staging left by a crashed attempt is discarded and the export made again. Concurrent
// calls for one id are serialised.
func (e Exports) Create(id uuid.UUID, owner ExportOwner, src ExportSource) (ExportManifest, error) {
	if err := validID(id); err != nil {
		return ExportManifest{}, err
	}
	if owner.Workspace == uuid.Nil || owner.Host == uuid.Nil || owner.Session == uuid.Nil {
		return ExportManifest{}, &domain.ValidationError{Field: "export_owner", Detail: "workspace, host and session must be UUIDs"}
	}
	if err := os.MkdirAll(e.Root, 0o700); err != nil {
		return ExportManifest{}, fmt.Errorf("export %s: %w", id, err)
	}
	unlock, err := lockFile(e.lockPath(id))
	if err != nil {
		return ExportManifest{}, fmt.Errorf("export %s: lock: %w", id, err)
	}
	defer unlock()

	if m, err := e.Stat(id); err == nil {
		if m.Owner != owner || m.checkpoint() != src.CheckpointID {
			return ExportManifest{}, fmt.Errorf("export %s: %w: it preserves workspace %s (host %s, session %s, checkpoint %s)",
				id, ErrExportConflict, m.Owner.Workspace, m.Owner.Host, m.Owner.Session, m.checkpoint())
		}
		return m, nil
	} else if !errors.Is(err, ErrExportMissing) {
		return ExportManifest{}, err // a corrupt export is evidence: never written over
	}

	if (src.CheckpointID == uuid.Nil) != (src.Checkpoint == "") {
		return ExportManifest{}, &domain.ValidationError{Field: "checkpoint", Detail: "a checkpoint needs both its id and its directory"}
	}
	if src.Workspace == "" {
		return ExportManifest{}, &domain.ValidationError{Field: "workspace", Detail: "the session workspace directory is required"}
	}
	// A tombstone of an earlier deletion under this id is finished first.
	if err := os.RemoveAll(e.deleting(id)); err != nil {
		return ExportManifest{}, fmt.Errorf("export %s: finish deletion: %w", id, err)
	}
	staging := e.partial(id)
	if err := os.RemoveAll(staging); err != nil {
		return ExportManifest{}, fmt.Errorf("export %s: discard partial staging: %w", id, err)
	}
	m, err := e.stage(id, owner, src, staging)
	if err != nil {
		_ = os.RemoveAll(staging)
		return ExportManifest{}, err
	}
	if err := renameNoReplace(staging, e.dir(id)); err != nil {
		_ = os.RemoveAll(staging)
		return ExportManifest{}, fmt.Errorf("export %s: publish: %w", id, err)
	}
	if err := syncDir(e.Root); err != nil {
		return ExportManifest{}, fmt.Errorf("export %s: publish: %w", id, err)
	}
	return m, nil
}

// stage copies everything into staging, writes the manifest and makes it all durable.
func (e Exports) stage(id uuid.UUID, owner ExportOwner, src ExportSource, staging string) (ExportManifest, error) {
	lim := e.limits()
	// A cheap scan first, so a workspace beyond the limits costs no copy at all.
	pre := newCopier(lim)
	if err := pre.scan(src.Workspace); err != nil {
		return ExportManifest{}, fmt.Errorf("export %s: workspace: %w", id, err)
	}
	if src.Checkpoint != "" {
		if err := pre.scan(src.Checkpoint); err != nil {
			return ExportManifest{}, fmt.Errorf("export %s: checkpoint: %w", id, err)
		}
	}
	if err := os.Mkdir(staging, 0o700); err != nil {
		return ExportManifest{}, fmt.Errorf("export %s: %w", id, err)
	}
	c := newCopier(lim)
	c.start()
	err := c.tree(src.Workspace, filepath.Join(staging, exportWorkspaceDir), exportWorkspaceDir)
	if err == nil && src.Checkpoint != "" {
		err = c.tree(src.Checkpoint, filepath.Join(staging, exportCheckpointDir), exportCheckpointDir)
	}
	entries, skipped, werr := c.wait()
	if err == nil {
		err = werr
	}
	if err != nil {
		return ExportManifest{}, fmt.Errorf("export %s: %w", id, err)
	}
	m := ExportManifest{Version: ExportManifestVersion, ID: id, Owner: owner, Entries: entries, Skipped: skipped,
		CreatedAt: domain.Timestamp(time.Now())}
	if src.CheckpointID != uuid.Nil {
		ck := src.CheckpointID
		m.CheckpointID = &ck
	}
	for _, en := range entries {
		switch en.Type {
		case EntryDir:
			m.Dirs++
		case EntryFile:
			m.Files++
			m.Bytes += en.Size
		case EntrySymlink:
			m.Symlinks++
		}
	}
	m.Checksum = m.checksum()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return ExportManifest{}, err
	}
	if err := writeNew(filepath.Join(staging, exportManifestName), append(b, '\n')); err != nil {
		return ExportManifest{}, fmt.Errorf("export %s: manifest: %w", id, err)
	}
	// One syncfs makes every byte and directory entry durable (instead of one fsync per
	// file); the rename that publishes comes after it.
	if err := syncFS(staging); err != nil {
		return ExportManifest{}, fmt.Errorf("export %s: sync: %w", id, err)
	}
	return m, nil
}

// Exists reports whether a committed export directory is present under id.
func (e Exports) Exists(id uuid.UUID) (bool, error) {
	if err := validID(id); err != nil {
		return false, err
	}
	st, err := os.Lstat(e.dir(id))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("export %s: %w", id, err)
	case !st.IsDir():
		return false, fmt.Errorf("export %s: %w: not a directory", id, ErrExportCorrupt)
	}
	return true, nil
}

// Stat reads an export's manifest and checks it against its own checksum and its
// structure (no bytes are read beyond the manifest).
func (e Exports) Stat(id uuid.UUID) (ExportManifest, error) {
	if err := validID(id); err != nil {
		return ExportManifest{}, err
	}
	ok, err := e.Exists(id)
	if err != nil {
		return ExportManifest{}, err
	}
	if !ok {
		return ExportManifest{}, fmt.Errorf("export %s: %w", id, ErrExportMissing)
	}
	b, err := readBounded(filepath.Join(e.dir(id), exportManifestName), maxManifestBytes)
	if err != nil {
		return ExportManifest{}, fmt.Errorf("export %s: %w: manifest: %v", id, ErrExportCorrupt, err)
	}
	var m ExportManifest
	if err := json.Unmarshal(b, &m); err != nil || m.Version != ExportManifestVersion {
		return ExportManifest{}, fmt.Errorf("export %s: %w: manifest is unreadable", id, ErrExportCorrupt)
	}
	if m.Checksum == "" || m.Checksum != m.checksum() {
		return ExportManifest{}, fmt.Errorf("export %s: %w: manifest does not match its checksum", id, ErrExportCorrupt)
	}
	if m.ID != id {
		return ExportManifest{}, fmt.Errorf("export %s: %w: manifest names export %s", id, ErrExportCorrupt, m.ID)
	}
	if err := m.checkStructure(); err != nil {
		return ExportManifest{}, fmt.Errorf("export %s: %w: %v", id, ErrExportCorrupt, err)
	}
	return m, nil
}

// checkStructure: every path is clean and local, under workspace/ (or checkpoint/ when the
// export has one), listed once, and its parent is a listed directory — so no entry can lead
// a restore through a symlink or outside the export.
func (m ExportManifest) checkStructure() error {
	types := make(map[string]string, len(m.Entries))
	for _, en := range m.Entries {
		if !localPath(en.Path) {
			return fmt.Errorf("entry %q is not a path inside the export", en.Path)
		}
		top, _, _ := strings.Cut(en.Path, "/")
		if top != exportWorkspaceDir && (top != exportCheckpointDir || m.CheckpointID == nil) {
			return fmt.Errorf("entry %q is outside workspace/ and checkpoint/", en.Path)
		}
		if _, dup := types[en.Path]; dup {
			return fmt.Errorf("entry %q is listed twice", en.Path)
		}
		switch en.Type {
		case EntryDir, EntryFile, EntrySymlink:
		default:
			return fmt.Errorf("entry %q has unknown type %q", en.Path, en.Type)
		}
		types[en.Path] = en.Type
	}
	if types[exportWorkspaceDir] != EntryDir {
		return errors.New("manifest lists no workspace directory")
	}
	if m.CheckpointID != nil && types[exportCheckpointDir] != EntryDir {
		return errors.New("manifest lists no checkpoint directory")
	}
	for _, en := range m.Entries {
		if parent := pathpkgDir(en.Path); parent != "." && types[parent] != EntryDir {
			return fmt.Errorf("entry %q has no directory parent", en.Path)
		}
	}
	return nil
}

// Verify is Stat plus a full check of the bytes: every entry is present with its type, size
// and symlink target, every file's SHA-256 matches, and nothing unlisted is there.
func (e Exports) Verify(id uuid.UUID) (ExportManifest, error) {
	m, err := e.Stat(id)
	if err != nil {
		return ExportManifest{}, err
	}
	if err := verifyTree(e.dir(id), m.Entries); err != nil {
		return ExportManifest{}, fmt.Errorf("export %s: %w", id, err)
	}
	return m, nil
}

// Remove deletes an export: it is renamed to a tombstone first (so <id> is either whole or
// gone), then removed. An absent export is already removed; a tombstone or a partial staging
// left by a crash is finished.
func (e Exports) Remove(id uuid.UUID) error {
	if err := validID(id); err != nil {
		return err
	}
	if _, err := os.Stat(e.Root); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	unlock, err := lockFile(e.lockPath(id))
	if err != nil {
		return fmt.Errorf("export %s: lock: %w", id, err)
	}
	defer unlock()
	tomb := e.deleting(id)
	if err := os.RemoveAll(tomb); err != nil {
		return fmt.Errorf("export %s: finish deletion: %w", id, err)
	}
	err = os.Rename(e.dir(id), tomb)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("export %s: %w", id, err)
	default:
		if err := syncDir(e.Root); err != nil {
			return fmt.Errorf("export %s: %w", id, err)
		}
		if err := os.RemoveAll(tomb); err != nil {
			return fmt.Errorf("export %s: %w", id, err)
		}
	}
	if err := os.RemoveAll(e.partial(id)); err != nil {
		return fmt.Errorf("export %s: %w", id, err)
	}
	_ = os.Remove(e.lockPath(id))
	return nil
}

// localPath: a clean, relative, slash-separated path that stays inside its root.
func localPath(p string) bool {
	return p != "" && filepath.IsLocal(filepath.FromSlash(p)) && filepath.ToSlash(filepath.Clean(filepath.FromSlash(p))) == p
}

func pathpkgDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "."
	}
	return p[:i]
}

func sortEntries(es []ExportEntry) {
	slices.SortFunc(es, func(a, b ExportEntry) int { return strings.Compare(a.Path, b.Path) })
}

// lockFile takes an exclusive flock on path (created 0600) until the returned func runs.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// writeNew writes a new private file (no sync: the caller syncs the filesystem).
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, nil
}

// syncFS flushes the filesystem that holds dir (syncfs(2)).
func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}

// syncDir makes a directory's entries (a rename into it) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// renameNoReplace renames a directory into place only if nothing is there (renameat2
// RENAME_NOREPLACE; a plain rename would replace an empty directory). A destination that
// appeared is fs.ErrExist.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A filesystem without RENAME_NOREPLACE: check, then rename.
		if _, serr := os.Lstat(to); serr == nil {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: fs.ErrExist}
		}
		return os.Rename(from, to)
	}
	if err != nil {
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
			err = fs.ErrExist
		}
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}
