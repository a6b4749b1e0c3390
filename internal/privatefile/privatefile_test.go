package privatefile

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestReplaceWritesAPrivateFileWhole(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.json")
	for _, body := range []string{"one", "two"} {
		if err := Replace(p, []byte(body)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		st, _ := os.Stat(p)
		if err != nil || string(b) != body || st.Mode().Perm() != 0o600 {
			t.Fatalf("%q %v %v", b, st.Mode().Perm(), err)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(p)); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}

func TestCreateLetsExactlyOneWriterWin(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	var wg sync.WaitGroup
	wins := make([]bool, 8)
	for i := range wins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := Create(p, []byte{byte('a' + i)})
			if err != nil {
				t.Error(err)
			}
			wins[i] = ok
		}()
	}
	wg.Wait()
	n := 0
	for _, w := range wins {
		if w {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d writers won", n)
	}
	if entries, _ := os.ReadDir(filepath.Dir(p)); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
}
