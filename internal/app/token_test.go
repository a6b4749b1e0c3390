package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOperatorTokenIsGeneratedOncePrivately(t *testing.T) {
	file := filepath.Join(t.TempDir(), "home", "api-token")
	first, err := OperatorToken("", file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.Value, "jam_") || len(first.Value) < 40 || first.File != file {
		t.Fatalf("token %+v", first)
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, %v", st.Mode().Perm(), err)
	}
	if dir, _ := os.Stat(filepath.Dir(file)); dir.Mode().Perm() != 0o700 {
		t.Fatalf("token directory mode %v", dir.Mode().Perm())
	}
	again, err := OperatorToken("", file)
	if err != nil || again.Value != first.Value {
		t.Fatalf("second start got %q, %v; want the same token", again.Value, err)
	}
}

func TestOperatorTokenFromEnvironmentWinsAndWritesNothing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api-token")
	tok, err := OperatorToken("from-env", file)
	if err != nil || tok.Value != "from-env" || tok.File != "" {
		t.Fatalf("%+v %v", tok, err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("token file written: %v", err)
	}
}

func TestOperatorTokenRefusesAFileOthersCanRead(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api-token")
	if err := os.WriteFile(file, []byte("jam_x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OperatorToken("", file); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("err = %v", err)
	}
}
