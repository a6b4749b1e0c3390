package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/jam-dev/jam/internal/domain"
)

// UsageLimits bound the walk of DirBytes.
var UsageLimits = struct {
	MaxEntries int
	MaxDepth   int
}{MaxEntries: 5_000_000, MaxDepth: 256}

// ErrUsageBounds: a directory holds more entries, or deeper ones, than DirBytes walks.
var ErrUsageBounds = errors.New("directory exceeds the usage walk bounds")

// DirBytes is the sum of the sizes of the regular files under dir. Symlinks are not
// followed, a file with several hard links under dir counts once (checkpoint generations
// share unchanged files), and an absent dir is 0. The walk is bounded (UsageLimits; beyond
// them the error wraps ErrUsageBounds).
func DirBytes(dir string) (int64, error) {
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if st.Mode().IsRegular() {
		return st.Size(), nil
	}
	if !st.IsDir() {
		return 0, nil
	}
	type inode struct{ dev, ino uint64 }
	var (
		total   int64
		entries int
		linked  = map[inode]bool{}
	)
	err = walkTree(dir, func(_ int, _, rel string, depth int, st *unix.Stat_t) (bool, error) {
		entries++
		switch {
		case entries > UsageLimits.MaxEntries:
			return false, fmt.Errorf("%w: more than %d entries under %s", ErrUsageBounds, UsageLimits.MaxEntries, dir)
		case depth > UsageLimits.MaxDepth:
			return false, fmt.Errorf("%w: %s is deeper than %d", ErrUsageBounds, rel, UsageLimits.MaxDepth)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			return true, nil
		case unix.S_IFREG:
			if st.Nlink > 1 {
				k := inode{uint64(st.Dev), uint64(st.Ino)}
				if linked[k] {
					return false, nil
				}
				linked[k] = true
			}
			total += st.Size
		}
		return false, nil
	})
	if err != nil {
		return 0, fmt.Errorf("usage of %s: %w", dir, err)
	}
	return total, nil
}

// RemoveSessionWorkspace removes one session's workspace directory: it is renamed to
// <workspace-root>/sessions/.<session>.removing first (so the session's path is either whole
// or gone), then removed without following any link in it. An absent workspace is already
// removed; a tombstone left by a crash is finished. Sibling sessions are never touched.
func RemoveSessionWorkspace(p Paths, session uuid.UUID) error {
	if session == uuid.Nil {
		return &domain.ValidationError{Field: "runtime_session", Detail: "must be a UUID"}
	}
	dir := p.Session(session)
	sessions := filepath.Dir(dir)
	tomb := filepath.Join(sessions, "."+session.String()+".removing")
	if err := removeTree(tomb); err != nil {
		return fmt.Errorf("remove workspace of %s: finish earlier removal: %w", session, err)
	}
	err := os.Rename(dir, tomb)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove workspace of %s: %w", session, err)
	}
	if err := syncDir(sessions); err != nil {
		return fmt.Errorf("remove workspace of %s: %w", session, err)
	}
	if err := removeTree(tomb); err != nil {
		return fmt.Errorf("remove workspace of %s: %w", session, err)
	}
	return nil
}

// removeTree is os.RemoveAll (which never follows a link) for a tree a guest wrote: when
// the removal fails — read-only directories, as a Go module cache makes — the directories
// are made the owner's (0700) and it is tried once more.
func removeTree(path string) error {
	err := os.RemoveAll(path)
	if err == nil {
		return nil
	}
	if _, serr := os.Lstat(path); serr != nil || chmodDirs(unix.AT_FDCWD, path, 0) != nil {
		return err
	}
	return os.RemoveAll(path)
}

// chmodDirs makes the directory name (relative to dir) and every directory below it 0700.
// The directory is opened as O_PATH without following a link and changed through its
// descriptor, so a directory swapped for a link is never followed.
func chmodDirs(dir int, name string, depth int) error {
	if depth > UsageLimits.MaxDepth {
		return ErrUsageBounds
	}
	pfd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(pfd), 0o700, 0)
	unix.Close(pfd)
	if err != nil {
		return err
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		if err := chmodDirs(fd, n, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// RemoveTree removes a tree a guest wrote (never following a link), making read-only
// directories writable when a first attempt fails. An absent path is already removed.
func RemoveTree(path string) error { return removeTree(path) }
