package workflows

import (
	"os"
	"testing"

	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
)

func TestMain(m *testing.M) {
	code := m.Run()
	fakesbx.Cleanup()
	os.Exit(code)
}
