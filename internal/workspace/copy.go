package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A session workspace is written by an untrusted guest, possibly while it is read. Every walk
// here therefore goes through directory descriptors: an entry is examined with
// fstatat(AT_SYMLINK_NOFOLLOW) relative to its parent's descriptor, a directory is entered
// with openat(O_NOFOLLOW|O_DIRECTORY) and must be the one examined, and a file is opened with
// openat(O_NOFOLLOW|O_NONBLOCK) and must be the regular file examined. A guest that swaps a
// path for a symlink (or a FIFO) mid-walk cannot lead a walk outside its root or block it.

// walkFunc sees one entry: its parent's descriptor, its name, its slash-separated path
// relative to the walk's root and its depth (1 for the root's children). Returning true for
// a directory descends into it.
type walkFunc func(dir int, name, rel string, depth int, st *unix.Stat_t) (descend bool, err error)

// errWalkStopped ends a walk whose work already failed elsewhere.
var errWalkStopped = errors.New("walk stopped")

// walkTree walks the tree under root (which must be a directory, not a symlink to one).
func walkTree(root string, fn walkFunc) error {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: root, Err: err}
	}
	return walkDir(os.NewFile(uintptr(fd), root), "", 0, fn)
}

func walkDir(d *os.File, rel string, depth int, fn walkFunc) error {
	defer d.Close()
	dfd := int(d.Fd())
	for {
		names, rerr := d.Readdirnames(512)
		for _, name := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue // removed since it was listed
				}
				return &os.PathError{Op: "lstat", Path: filepath.Join(d.Name(), name), Err: err}
			}
			child := name
			if rel != "" {
				child = rel + "/" + name
			}
			descend, err := fn(dfd, name, child, depth+1, &st)
			if err != nil {
				return err
			}
			if !descend || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			cfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if errors.Is(err, unix.ENOENT) {
				continue // removed since it was examined
			}
			if err != nil {
				return &os.PathError{Op: "open", Path: filepath.Join(d.Name(), name), Err: err}
			}
			sub := os.NewFile(uintptr(cfd), filepath.Join(d.Name(), name))
			var now unix.Stat_t
			if err := unix.Fstat(cfd, &now); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
				sub.Close()
				return fmt.Errorf("%s changed while it was read", sub.Name())
			}
			if err := walkDir(sub, child, depth+1, fn); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// openRegular opens a regular file the walk examined, refusing anything else in its place.
func openRegular(dir int, name string, st *unix.Stat_t) (*os.File, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if now.Mode&unix.S_IFMT != unix.S_IFREG || now.Dev != st.Dev || now.Ino != st.Ino {
		unix.Close(fd)
		return nil, errors.New("changed into another file while it was read")
	}
	return os.NewFile(uintptr(fd), name), nil
}

// readlinkAt reads a symlink's target relative to its directory's descriptor.
func readlinkAt(dir int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", err
	}
	if n >= len(buf) {
		return "", errors.New("symlink target is too long")
	}
	return string(buf[:n]), nil
}

// fileMode is the mode an exported or restored file gets: its owner's bits, readable and
// writable by the owner (an executable stays executable), nothing for anyone else.
func fileMode(perm uint32) uint32 { return perm&0o700 | 0o600 }

const copyBufSize = 1 << 20

// copier copies trees into private directories, hashing every file, on a few workers. The
// walk (one goroutine) creates directories and symlinks and opens each source file; workers
// copy and hash. Limits hold across every tree of one copier.
type copier struct {
	limits  ExportLimits
	entries int   // entries seen by the walk (walk goroutine only)
	scanned int64 // bytes the walk saw (walk goroutine only)
	skipped int   // special files not copied (walk goroutine only)

	copied  atomic.Int64 // bytes workers wrote
	noClone atomic.Bool  // the destination filesystem refused a reflink once
	failed  atomic.Bool

	jobs chan copyJob
	wg   sync.WaitGroup

	mu  sync.Mutex
	out []ExportEntry
	err error
}

type copyJob struct {
	src  *os.File
	dst  string
	path string
	mode uint32
}

func newCopier(l ExportLimits) *copier { return &copier{limits: l} }

// copyWorkers: two cores read, hash and write; more workers than cores keep the disk busy
// while a worker waits on it.
func copyWorkers() int { return min(max(2*runtime.GOMAXPROCS(0), 2), 4) }

func (c *copier) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.failed.Store(true)
}

func (c *copier) add(e ExportEntry) {
	c.mu.Lock()
	c.out = append(c.out, e)
	c.mu.Unlock()
}

// count applies the entry, depth and byte limits to one walked entry.
func (c *copier) count(rel string, depth int, size int64) error {
	c.entries++
	c.scanned += size
	switch {
	case depth > c.limits.MaxDepth:
		return fmt.Errorf("%w: %s is deeper than %d", ErrExportTooLarge, rel, c.limits.MaxDepth)
	case c.entries > c.limits.MaxEntries:
		return fmt.Errorf("%w: more than %d entries", ErrExportTooLarge, c.limits.MaxEntries)
	case c.scanned > c.limits.MaxBytes:
		return fmt.Errorf("%w: more than %d bytes", ErrExportTooLarge, c.limits.MaxBytes)
	}
	return nil
}

// scan applies the limits to a tree without copying anything.
func (c *copier) scan(root string) error {
	return walkTree(root, func(_ int, _, rel string, depth int, st *unix.Stat_t) (bool, error) {
		var size int64
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			size = st.Size
		}
		return true, c.count(rel, depth, size)
	})
}

func (c *copier) start() {
	c.jobs = make(chan copyJob, 64)
	for range copyWorkers() {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			buf := make([]byte, copyBufSize)
			h := sha256.New()
			for j := range c.jobs {
				if !c.failed.Load() {
					if e, err := c.copyFile(j, buf, h); err != nil {
						c.fail(fmt.Errorf("copy %s: %w", j.path, err))
					} else {
						c.add(e)
					}
				}
				j.src.Close()
			}
		}()
	}
}

// wait ends the workers and returns every entry copied, sorted by path.
func (c *copier) wait() ([]ExportEntry, int, error) {
	close(c.jobs)
	c.wg.Wait()
	if c.err != nil {
		return nil, 0, c.err
	}
	sortEntries(c.out)
	return c.out, c.skipped, nil
}

// tree copies the directory src to the new directory dst (0700); its entries are named
// prefix/<path relative to src>. Special files are skipped and counted.
func (c *copier) tree(src, dst, prefix string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	c.add(ExportEntry{Path: prefix, Type: EntryDir, Mode: 0o700})
	err := walkTree(src, func(dir int, name, rel string, depth int, st *unix.Stat_t) (bool, error) {
		if c.failed.Load() {
			return false, errWalkStopped
		}
		path := prefix + "/" + rel
		target := filepath.Join(dst, filepath.FromSlash(rel))
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if err := c.count(rel, depth, 0); err != nil {
				return false, err
			}
			if err := os.Mkdir(target, 0o700); err != nil {
				return false, err
			}
			c.add(ExportEntry{Path: path, Type: EntryDir, Mode: 0o700})
			return true, nil
		case unix.S_IFLNK:
			if err := c.count(rel, depth, 0); err != nil {
				return false, err
			}
			link, err := readlinkAt(dir, name)
			if errors.Is(err, unix.ENOENT) {
				return false, nil // removed since it was examined
			}
			if err != nil {
				return false, fmt.Errorf("%s: %w", path, err)
			}
			if err := os.Symlink(link, target); err != nil {
				return false, err
			}
			c.add(ExportEntry{Path: path, Type: EntrySymlink, Mode: 0o777, Target: link})
		case unix.S_IFREG:
			if err := c.count(rel, depth, st.Size); err != nil {
				return false, err
			}
			f, err := openRegular(dir, name, st)
			if errors.Is(err, unix.ENOENT) {
				return false, nil // removed since it was examined
			}
			if err != nil {
				return false, fmt.Errorf("%s: %w", path, err)
			}
			c.jobs <- copyJob{src: f, dst: target, path: path, mode: fileMode(st.Mode & 0o777)}
		default:
			if err := c.count(rel, depth, 0); err != nil {
				return false, err
			}
			c.skipped++
		}
		return false, nil
	})
	if errors.Is(err, errWalkStopped) {
		return nil // the worker's error is reported by wait
	}
	return err
}

// copyFile copies one open source file to a new private file and hashes what the copy holds.
// Where the filesystem can, the copy is a reflink (FICLONE): no bytes are duplicated and the
// source is read once for the hash; if the source changed while it was hashed, the clone
// itself is hashed instead. Elsewhere bytes are read once, hashed and written. Nothing is
// synced here: the caller syncs the filesystem once.
func (c *copier) copyFile(j copyJob, buf []byte, h hash.Hash) (ExportEntry, error) {
	out, err := os.OpenFile(j.dst, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return ExportEntry{}, err
	}
	defer out.Close()
	if j.mode != 0o600 {
		if err := out.Chmod(os.FileMode(j.mode)); err != nil {
			return ExportEntry{}, err
		}
	}
	h.Reset()
	var n int64
	cloned := false
	if !c.noClone.Load() {
		n, cloned, err = c.cloneAndHash(j.src, out, buf, h)
		if err != nil {
			return ExportEntry{}, err
		}
	}
	if !cloned {
		if n, err = c.copyAndHash(j.src, out, buf, h); err != nil {
			return ExportEntry{}, err
		}
		// Start writeback now so the final sync finds little left to write.
		_ = unix.SyncFileRange(int(out.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	}
	if err := out.Close(); err != nil {
		return ExportEntry{}, err
	}
	return ExportEntry{Path: j.path, Type: EntryFile, Mode: j.mode, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

func (c *copier) cloneAndHash(src, out *os.File, buf []byte, h hash.Hash) (int64, bool, error) {
	var before, after unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &before); err != nil {
		return 0, false, err
	}
	if err := unix.IoctlFileClone(int(out.Fd()), int(src.Fd())); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) ||
			errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			c.noClone.Store(true)
		}
		return 0, false, nil // copy instead
	}
	n, err := c.hashFrom(src, buf, h)
	if err != nil {
		return 0, false, err
	}
	if err := unix.Fstat(int(src.Fd()), &after); err != nil {
		return 0, false, err
	}
	if before.Size != after.Size || before.Mtim != after.Mtim || before.Ctim != after.Ctim || n != after.Size {
		// The source moved on while it was hashed: hash what the clone holds.
		h.Reset()
		c.copied.Add(-n)
		if n, err = c.hashFrom(io.NewSectionReader(out, 0, 1<<62), buf, h); err != nil {
			return 0, false, err
		}
	}
	return n, true, nil
}

// hashFrom hashes r to its end, counting the bytes against the byte limit.
func (c *copier) hashFrom(r io.Reader, buf []byte, h hash.Hash) (int64, error) {
	var n int64
	for {
		k, err := r.Read(buf)
		if k > 0 {
			n += int64(k)
			if c.copied.Add(int64(k)) > c.limits.MaxBytes {
				return n, fmt.Errorf("%w: more than %d bytes", ErrExportTooLarge, c.limits.MaxBytes)
			}
			h.Write(buf[:k])
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// copyAndHash reads src once, hashing and writing every byte (bounded by the byte limit:
// a file that grows while it is copied cannot fill the disk).
func (c *copier) copyAndHash(src, out *os.File, buf []byte, h hash.Hash) (int64, error) {
	var n int64
	for {
		k, err := src.Read(buf)
		if k > 0 {
			n += int64(k)
			if c.copied.Add(int64(k)) > c.limits.MaxBytes {
				return n, fmt.Errorf("%w: more than %d bytes", ErrExportTooLarge, c.limits.MaxBytes)
			}
			h.Write(buf[:k])
			if _, werr := out.Write(buf[:k]); werr != nil {
				return n, werr
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// verifyTree checks the directory root against entries: every entry present with its type,
// size, symlink target and (files) SHA-256, and nothing else there but the manifest.
func verifyTree(root string, entries []ExportEntry) error {
	want := make(map[string]*ExportEntry, len(entries))
	for i := range entries {
		want[entries[i].Path] = &entries[i]
	}
	seen := make(map[string]bool, len(entries))
	type job struct {
		f    *os.File
		want *ExportEntry
	}
	jobs := make(chan job, 64)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		first   error
		stopped atomic.Bool
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		stopped.Store(true)
	}
	for range copyWorkers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, copyBufSize)
			h := sha256.New()
			for j := range jobs {
				if !stopped.Load() {
					h.Reset()
					n, err := io.CopyBuffer(h, struct{ io.Reader }{j.f}, buf)
					switch {
					case err != nil:
						fail(fmt.Errorf("%w: %s: %v", ErrExportCorrupt, j.want.Path, err))
					case n != j.want.Size || hex.EncodeToString(h.Sum(nil)) != j.want.SHA256:
						fail(fmt.Errorf("%w: %s does not match its checksum", ErrExportCorrupt, j.want.Path))
					}
				}
				j.f.Close()
			}
		}()
	}
	err := walkTree(root, func(dir int, name, rel string, _ int, st *unix.Stat_t) (bool, error) {
		if stopped.Load() {
			return false, errWalkStopped
		}
		if rel == exportManifestName {
			return false, nil
		}
		w, ok := want[rel]
		if !ok {
			return false, fmt.Errorf("%w: %s is not in the manifest", ErrExportCorrupt, rel)
		}
		seen[rel] = true
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if w.Type != EntryDir {
				break
			}
			return true, nil
		case unix.S_IFLNK:
			if w.Type != EntrySymlink {
				break
			}
			if link, err := readlinkAt(dir, name); err != nil || link != w.Target {
				return false, fmt.Errorf("%w: symlink %s changed", ErrExportCorrupt, rel)
			}
			return false, nil
		case unix.S_IFREG:
			if w.Type != EntryFile {
				break
			}
			if st.Size != w.Size {
				return false, fmt.Errorf("%w: %s has %d bytes, the manifest says %d", ErrExportCorrupt, rel, st.Size, w.Size)
			}
			f, err := openRegular(dir, name, st)
			if err != nil {
				return false, fmt.Errorf("%w: %s: %v", ErrExportCorrupt, rel, err)
			}
			jobs <- job{f: f, want: w}
			return false, nil
		}
		return false, fmt.Errorf("%w: %s is not a %s", ErrExportCorrupt, rel, w.Type)
	})
	close(jobs)
	wg.Wait()
	if first != nil {
		return first
	}
	if err != nil && !errors.Is(err, errWalkStopped) {
		if !errors.Is(err, ErrExportCorrupt) {
			err = fmt.Errorf("%w: %v", ErrExportCorrupt, err)
		}
		return err
	}
	for _, e := range entries {
		if !seen[e.Path] {
			return fmt.Errorf("%w: %s is missing", ErrExportCorrupt, e.Path)
		}
	}
	return nil
}
