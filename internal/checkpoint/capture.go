package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/privatefile"
)

// CaptureRequest is one generation to publish.
type CaptureRequest struct {
	Meta
	// Source is the provider's state directory; Include are the paths under it the adapter
	// chose (files or directories, slash-separated, relative); empty captures all of Source.
	Source  string
	Include []string
	// Previous is the generation unchanged files are hard-linked from (nil: copy everything).
	Previous *uuid.UUID
	Limits   Limits
	At       time.Time
}

// entry is one regular file found by the scan.
type entry struct {
	rel  string
	info fs.FileInfo
}

// Capture stages the chosen files under the checkpoint's directory and publishes the
// generation: payload first (0700 directories, 0600 files), complete.json last. An exact
// retry of a published generation returns it unchanged; a different one under the same UUID
// is ErrConflict; a retry over a partial staging starts it again. Symlinks and special files
// are not captured (a restored link could point anywhere).
func (s Store) Capture(ctx context.Context, req CaptureRequest) (Manifest, error) {
	if req.Limits == (Limits{}) {
		req.Limits = DefaultLimits
	}
	if !domain.CheckpointReasons.Has(req.Reason) {
		return Manifest{}, &domain.ValidationError{Field: "reason", Detail: fmt.Sprintf("%q is not a checkpoint reason", req.Reason)}
	}
	dir, err := s.dir(req.ID)
	if err != nil {
		return Manifest{}, err
	}
	if in, err := s.Inspect(req.ID); err != nil {
		return Manifest{}, err
	} else if in.Status == StatusComplete || in.Status == StatusCorrupt {
		if in.Status == StatusComplete && sameMeta(in.Manifest.Meta, req.Meta) {
			return in.Manifest, nil
		}
		return Manifest{}, fmt.Errorf("checkpoint %s: %w", req.ID, ErrConflict)
	}
	files, total, err := scan(ctx, req)
	if err != nil {
		return Manifest{}, err
	}
	// Start from nothing: a partial staging of a crashed attempt is not trusted.
	if err := os.RemoveAll(dir); err != nil {
		return Manifest{}, fmt.Errorf("checkpoint %s: clear partial staging: %w", req.ID, err)
	}
	payload := filepath.Join(dir, payloadDir)
	if err := os.MkdirAll(payload, 0o700); err != nil {
		return Manifest{}, fmt.Errorf("checkpoint %s: %w", req.ID, err)
	}
	prev := s.previous(req.Previous)
	m := Manifest{Version: ManifestVersion, Meta: req.Meta, Files: make([]File, len(files)), Bytes: total,
		CreatedAt: domain.Timestamp(req.At)}
	if err := makeParents(payload, files); err != nil {
		return Manifest{}, fmt.Errorf("checkpoint %s: %w", req.ID, err)
	}
	err = forEachParallel(ctx, len(files), func(i int) error {
		e := files[i]
		f := File{Path: e.rel, Mode: uint32(e.info.Mode().Perm()), Size: e.info.Size(), ModTime: e.info.ModTime().UnixNano()}
		dst := filepath.Join(payload, filepath.FromSlash(e.rel))
		if p, ok := prev[e.rel]; ok && p.Size == f.Size && p.ModTime == f.ModTime && p.Mode == f.Mode {
			if err := os.Link(filepath.Join(s.Root, req.Previous.String(), payloadDir, filepath.FromSlash(e.rel)), dst); err == nil {
				f.Linked = true
			}
		}
		if !f.Linked {
			if err := captureFile(filepath.Join(req.Source, filepath.FromSlash(e.rel)), dst, e.info); err != nil {
				return fmt.Errorf("checkpoint %s: capture %s: %w", req.ID, e.rel, err)
			}
		}
		m.Files[i] = f
		return nil
	})
	if err != nil {
		return Manifest{}, err
	}
	m.Checksum = m.checksum()
	b, err := jsonIndent(m)
	if err != nil {
		return Manifest{}, err
	}
	// Every payload byte and directory entry is durable before the manifest says so.
	if err := syncFS(payload); err != nil {
		return Manifest{}, fmt.Errorf("checkpoint %s: sync payload: %w", req.ID, err)
	}
	created, err := privatefile.Create(filepath.Join(dir, manifestName), b)
	if err != nil {
		return Manifest{}, fmt.Errorf("checkpoint %s: publish: %w", req.ID, err)
	}
	if !created {
		// A concurrent attempt published first: its manifest is the generation.
		in, err := s.Inspect(req.ID)
		if err != nil {
			return Manifest{}, err
		}
		if in.Status != StatusComplete || !sameMeta(in.Manifest.Meta, req.Meta) {
			return Manifest{}, fmt.Errorf("checkpoint %s: %w", req.ID, ErrConflict)
		}
		return in.Manifest, nil
	}
	return m, nil
}

// copyWorkers is how many files are copied at once. Copying is mostly waiting on the
// disk and the page cache, not the CPU, so a few more than the cores keep both busy.
var copyWorkers = max(4, 2*runtime.GOMAXPROCS(0))

// forEachParallel runs fn(0..n-1) on copyWorkers goroutines and returns the first error
// (the rest stop taking work), or ctx's error.
func forEachParallel(ctx context.Context, n int, fn func(i int) error) error {
	var (
		next     atomic.Int64
		failed   atomic.Bool
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		once.Do(func() { firstErr = err })
		failed.Store(true)
	}
	for range min(copyWorkers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if i%256 == 0 && ctx.Err() != nil {
					fail(ctx.Err())
				}
				if err := fn(i); err != nil {
					fail(err)
				}
				if failed.Load() {
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// makeParents creates every directory the files need, each once (0700), parents first.
func makeParents(root string, files []entry) error {
	made := map[string]bool{".": true}
	for _, e := range files {
		var missing []string
		for d := path.Dir(e.rel); !made[d]; d = path.Dir(d) {
			missing = append(missing, d)
			made[d] = true
		}
		for i := len(missing) - 1; i >= 0; i-- {
			if err := os.Mkdir(filepath.Join(root, filepath.FromSlash(missing[i])), 0o700); err != nil {
				return err
			}
		}
	}
	return nil
}

// previous indexes the files of the generation unchanged files may be linked from; a
// generation that is not Complete offers nothing.
func (s Store) previous(id *uuid.UUID) map[string]File {
	if id == nil {
		return nil
	}
	in, err := s.Inspect(*id)
	if err != nil || in.Status != StatusComplete {
		return nil
	}
	out := make(map[string]File, len(in.Manifest.Files))
	for _, f := range in.Manifest.Files {
		out[f.Path] = f
	}
	return out
}

func sameMeta(a, b Meta) bool {
	return a.ID == b.ID && a.Host == b.Host && a.Reason == b.Reason && a.Provider == b.Provider &&
		a.ProviderVersion == b.ProviderVersion && slices.Equal(a.Sessions, b.Sessions)
}

// scan lists the regular files to capture, in a stable order, within the limits.
func scan(ctx context.Context, req CaptureRequest) ([]entry, int64, error) {
	roots := req.Include
	if len(roots) == 0 {
		roots = []string{"."}
	}
	var (
		out   []entry
		total int64
		seen  = map[string]bool{}
	)
	for _, r := range roots {
		clean := filepath.ToSlash(filepath.Clean(filepath.FromSlash(r)))
		if filepath.IsAbs(r) || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, 0, &domain.ValidationError{Field: "include", Detail: fmt.Sprintf("%q is not a path inside the state directory", r)}
		}
		start := filepath.Join(req.Source, filepath.FromSlash(clean))
		err := filepath.WalkDir(start, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && path == start {
					return fs.SkipAll // an included path the provider never wrote
				}
				return err
			}
			rel, err := filepath.Rel(req.Source, path)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if depth := strings.Count(rel, "/") + 1; depth > req.Limits.MaxDepth {
				return fmt.Errorf("%w: %s is deeper than %d", ErrTooLarge, rel, req.Limits.MaxDepth)
			}
			if !d.Type().IsRegular() || seen[rel] {
				return nil // directories are implied; links and special files are not captured
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			seen[rel] = true
			total += info.Size()
			out = append(out, entry{rel: rel, info: info})
			switch {
			case len(out) > req.Limits.MaxFiles:
				return fmt.Errorf("%w: more than %d files", ErrTooLarge, req.Limits.MaxFiles)
			case total > req.Limits.MaxBytes:
				return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, req.Limits.MaxBytes)
			}
			if len(out)%1024 == 0 {
				return ctx.Err()
			}
			return nil
		})
		if err != nil {
			return nil, 0, fmt.Errorf("checkpoint %s: scan %s: %w", req.ID, clean, err)
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.rel, b.rel) })
	return out, total, nil
}

// captureFile copies a scanned file of a live provider's state. The state may be written by
// a running guest: the file is opened without following a final link and must be the very
// file the scan saw (device and inode), so a path swapped for a link to a host file since the
// scan is refused rather than captured.
func captureFile(src, dst string, scanned fs.FileInfo) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	was, ok1 := scanned.Sys().(*syscall.Stat_t)
	now, ok2 := st.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 || was.Dev != now.Dev || was.Ino != now.Ino || !st.Mode().IsRegular() {
		return fmt.Errorf("%s changed into another file since it was scanned", src)
	}
	return copyOpen(in, dst, scanned.Size())
}

// copyFile copies exactly size bytes into a new private file. It does not sync: publication
// syncs the whole filesystem once before complete.json is written (one syncfs instead of one
// fsync per file).
func copyFile(src, dst string, size int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return copyOpen(in, dst, size)
}

func copyOpen(in *os.File, dst string, size int64) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, in)
	if err == nil && n != size {
		err = fmt.Errorf("changed while captured (%d bytes, expected %d)", n, size)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
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
