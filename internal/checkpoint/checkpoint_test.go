package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func request(src string, prev *uuid.UUID) CaptureRequest {
	return CaptureRequest{Meta: Meta{ID: uuid.New(), Host: uuid.New(), Reason: domain.CheckpointBeforeStop,
		Provider: domain.ProviderACP, ProviderVersion: "0.1.0",
		Sessions: []Session{{RuntimeSession: uuid.New(), ProviderSessionID: "sess-1"}}},
		Source: src, Previous: prev, At: time.Now()}
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

func TestAPublishedGenerationIsPrivateImmutableAndIdempotentUnderItsID(t *testing.T) {
	ctx := context.Background()
	src, s := t.TempDir(), Store{Root: t.TempDir()}
	writeTree(t, src, map[string]string{"sessions/a.json": "A", "notes.txt": "hello"})
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "escape")); err != nil {
		t.Fatal(err)
	}
	req := request(src, nil)
	m, err := s.Capture(ctx, req)
	if err != nil || len(m.Files) != 2 || m.Bytes != 6 || m.Checksum == "" {
		t.Fatalf("capture %+v %v", m, err)
	}
	in, err := s.Inspect(req.ID)
	if err != nil || in.Status != StatusComplete {
		t.Fatalf("inspect %+v %v", in, err)
	}
	for _, p := range []string{"payload/sessions/a.json", "complete.json"} {
		if st, _ := os.Stat(filepath.Join(s.Root, req.ID.String(), p)); st.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v", p, st.Mode().Perm())
		}
	}
	if st, _ := os.Stat(filepath.Join(s.Root, req.ID.String(), "payload", "sessions")); st.Mode().Perm() != 0o700 {
		t.Errorf("payload directory is %v", st.Mode().Perm())
	}
	if _, err := os.Lstat(filepath.Join(s.Root, req.ID.String(), "payload", "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a symlink was captured")
	}
	// An exact retry returns the published generation; other metadata under the id is refused.
	again, err := s.Capture(ctx, req)
	if err != nil || again.Checksum != m.Checksum {
		t.Fatalf("exact retry %+v %v", again, err)
	}
	other := req
	other.Reason = domain.CheckpointManual
	if _, err := s.Capture(ctx, other); !errors.Is(err, ErrConflict) {
		t.Fatalf("a different generation under the same id: %v", err)
	}
}

func TestAStagedButUnpublishedGenerationIsIncompleteAndARetryPublishesIt(t *testing.T) {
	ctx := context.Background()
	src, s := t.TempDir(), Store{Root: t.TempDir()}
	writeTree(t, src, map[string]string{"state.db": "data"})
	req := request(src, nil)
	// A crash mid-capture: payload bytes, no complete.json.
	writeTree(t, filepath.Join(s.Root, req.ID.String(), "payload"), map[string]string{"state.db": "da"})
	if in, _ := s.Inspect(req.ID); in.Status != StatusIncomplete {
		t.Fatalf("inspect %+v", in)
	}
	if _, err := s.Restore(ctx, req.ID, t.TempDir()+"/dest"); !errors.Is(err, ErrNotRestorable) {
		t.Fatalf("an incomplete generation was restored: %v", err)
	}
	if _, err := s.Capture(ctx, req); err != nil {
		t.Fatal(err)
	}
	if in, _ := s.Inspect(req.ID); in.Status != StatusComplete {
		t.Fatalf("after retry %+v", in)
	}
	if in, _ := s.Inspect(uuid.New()); in.Status != StatusMissing {
		t.Fatalf("unknown generation %+v", in)
	}
}

func TestUnchangedFilesAreLinkedFromThePreviousGenerationAndChangedOnesCopied(t *testing.T) {
	ctx := context.Background()
	src, s := t.TempDir(), Store{Root: t.TempDir()}
	writeTree(t, src, map[string]string{"same.txt": "unchanged", "hot.txt": "v1"})
	first := request(src, nil)
	if _, err := s.Capture(ctx, first); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second)
	writeTree(t, src, map[string]string{"hot.txt": "v2!", "new.txt": "n"})
	_ = os.Chtimes(filepath.Join(src, "hot.txt"), later, later)
	second := request(src, &first.ID)
	m, err := s.Capture(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, f := range m.Files {
		linked[f.Path] = f.Linked
	}
	if !linked["same.txt"] || linked["hot.txt"] || linked["new.txt"] {
		t.Fatalf("linked %v", linked)
	}
	p := func(id uuid.UUID, rel string) string { return filepath.Join(s.Root, id.String(), "payload", rel) }
	if inode(t, p(first.ID, "same.txt")) != inode(t, p(second.ID, "same.txt")) {
		t.Fatal("the unchanged file was copied")
	}
	if b, _ := os.ReadFile(p(first.ID, "hot.txt")); string(b) != "v1" {
		t.Fatalf("the first generation changed: %q", b)
	}
	// Restore fills an empty state directory (never replacing it: it may be a mount) by copy:
	// writing to the restored state never reaches a generation. Live state is never
	// overwritten.
	live := filepath.Join(t.TempDir(), "live")
	writeTree(t, live, map[string]string{"stale.txt": "x"})
	if _, err := s.Restore(ctx, second.ID, live); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("restore over live state: %v", err)
	}
	dest := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dest, 0o700); err != nil {
		t.Fatal(err)
	}
	root := inode(t, dest)
	if _, err := s.Restore(ctx, second.ID, dest); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "hot.txt")); string(b) != "v2!" {
		t.Fatalf("restored %q", b)
	}
	if inode(t, dest) != root {
		t.Fatal("restore replaced the state directory instead of filling it")
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dest), ".restore-*")); len(left) != 0 {
		t.Fatalf("staging left behind: %v", left)
	}
	if inode(t, filepath.Join(dest, "same.txt")) == inode(t, p(second.ID, "same.txt")) {
		t.Fatal("a restored file shares the generation's inode")
	}
}

func TestACorruptGenerationIsReportedAndNeverRestored(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a": "1", "b": "22"})
	for name, corrupt := range map[string]func(s Store, id uuid.UUID){
		"tampered manifest": func(s Store, id uuid.UUID) {
			p := filepath.Join(s.Root, id.String(), "complete.json")
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p, []byte(strings.Replace(string(b), `"bytes": 3`, `"bytes": 4`, 1)), 0o600)
		},
		"missing payload file": func(s Store, id uuid.UUID) {
			_ = os.Remove(filepath.Join(s.Root, id.String(), "payload", "b"))
		},
		"truncated payload file": func(s Store, id uuid.UUID) {
			_ = os.WriteFile(filepath.Join(s.Root, id.String(), "payload", "b"), []byte("2"), 0o600)
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := Store{Root: t.TempDir()}
			req := request(src, nil)
			if _, err := s.Capture(ctx, req); err != nil {
				t.Fatal(err)
			}
			corrupt(s, req.ID)
			if in, _ := s.Inspect(req.ID); in.Status != StatusCorrupt {
				t.Fatalf("inspect %+v", in)
			}
			if _, err := s.Restore(ctx, req.ID, filepath.Join(t.TempDir(), "d")); !errors.Is(err, ErrNotRestorable) {
				t.Fatalf("restored: %v", err)
			}
		})
	}
}

func TestCaptureRefusesStateBeyondItsLimits(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a/b/c/d.txt": "1234", "e.txt": "56"})
	for name, l := range map[string]Limits{
		"files": {MaxFiles: 1, MaxBytes: 100, MaxDepth: 64},
		"bytes": {MaxFiles: 10, MaxBytes: 5, MaxDepth: 64},
		"depth": {MaxFiles: 10, MaxBytes: 100, MaxDepth: 3},
	} {
		t.Run(name, func(t *testing.T) {
			s := Store{Root: t.TempDir()}
			req := request(src, nil)
			req.Limits = l
			if _, err := s.Capture(ctx, req); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("capture: %v", err)
			}
			if in, _ := s.Inspect(req.ID); in.Status != StatusMissing {
				t.Fatalf("something was published: %+v", in)
			}
		})
	}
	s := Store{Root: t.TempDir()}
	req := request(src, nil)
	req.Include = []string{"../outside"}
	var ve *domain.ValidationError
	if _, err := s.Capture(ctx, req); !errors.As(err, &ve) {
		t.Fatalf("an include outside the state: %v", err)
	}
	req.Include = []string{"a/b", "never-written"}
	m, err := s.Capture(ctx, req)
	if err != nil || len(m.Files) != 1 || m.Files[0].Path != "a/b/c/d.txt" {
		t.Fatalf("included %+v %v", m.Files, err)
	}
}

// A file of the live state swapped for a link to a host file between the scan and the copy
// is refused, never captured.
func TestAFileSwappedForALinkAfterTheScanIsNotCaptured(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "guest"})
	info, err := os.Lstat(filepath.Join(src, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("hosty"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(src, "a.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(src, "a.txt")); err != nil {
		t.Fatal(err)
	}
	if err := captureFile(filepath.Join(src, "a.txt"), filepath.Join(t.TempDir(), "out"), info); err == nil {
		t.Fatal("a swapped link was followed")
	}
	// A parent directory swapped for a link: the opened file is not the scanned one.
	sub := filepath.Join(src, "dir")
	writeTree(t, sub, map[string]string{"b.txt": "guest"})
	binfo, _ := os.Lstat(filepath.Join(sub, "b.txt"))
	elsewhere := t.TempDir()
	writeTree(t, elsewhere, map[string]string{"b.txt": "hosty"})
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, sub); err != nil {
		t.Fatal(err)
	}
	if err := captureFile(filepath.Join(sub, "b.txt"), filepath.Join(t.TempDir(), "out2"), binfo); err == nil {
		t.Fatal("a swapped parent directory was followed")
	}
}
