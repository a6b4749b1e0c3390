package test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
)

// TestWebUIScreenshots is `make screenshots` (JAM_SCREENSHOTS=1; not gated by CI): it runs
// jam dev with a room whose agent answered, and has headless Chromium (Debian's chromium,
// driven by playwright-core: the UI renders client-side and long-polls) photograph the
// Temporal Web UI's workflow list filtered by JamRoom, the room's RoomSession timeline with
// its labelled activities, and its summary and current details, into docs/screenshots/ (or
// JAM_SCREENSHOTS_DIR).
func TestWebUIScreenshots(t *testing.T) {
	t.Parallel()
	if os.Getenv("JAM_SCREENSHOTS") != "1" {
		t.Skip("screenshots: run with `make screenshots` (JAM_SCREENSHOTS=1)")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is required (apt-get install chromium): %v", err)
	}
	pw := os.Getenv("PLAYWRIGHT_CORE_DIR")
	if _, err := os.Stat(filepath.Join(pw, "package.json")); pw == "" || err != nil {
		t.Fatalf("PLAYWRIGHT_CORE_DIR must name an installed playwright-core (make screenshots installs it): %q", pw)
	}
	out := os.Getenv("JAM_SCREENSHOTS_DIR")
	if out == "" {
		out = filepath.Join("..", "docs", "screenshots")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), ownedEnv(t, t.TempDir()))
	c := d.client
	agent := codexAgent(t, c, "demo", domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP})
	room, session := roomWith(t, c, "lab", agent)
	awaitReply(t, c, postText(t, c, room.ID, "hello"), time.Minute)
	awaitListed(t, temporaltest.Dial(t, d.temporal), fmt.Sprintf("JamRoom='%s'", room.ID),
		func(s string) bool { return s == string(domain.PhaseLive) })

	ns := url.PathEscape("default")
	wf := d.uiURL + "/namespaces/" + ns + "/workflows/" + url.PathEscape(contract.RoomSessionID(session))
	shots := []struct {
		file, page string
		steps      []string
	}{
		// The list filtered by JamRoom.
		{"workflows-by-room.png", d.uiURL + "/namespaces/" + ns + "/workflows?query=" +
			url.QueryEscape(fmt.Sprintf("JamRoom='%s'", room.ID)), []string{contract.RoomSessionID(session)}},
		// The session's timeline: its activities and timer labelled.
		{"roomsession-timeline.png", wf, []string{"Pending Activities"}},
		// Its summary and current details.
		{"roomsession-details.png", wf, []string{"click:User Metadata", "Current Details"}},
	}
	for _, shot := range shots {
		path, err := filepath.Abs(filepath.Join(out, shot.file))
		if err != nil {
			t.Fatal(err)
		}
		page := shot.page
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join("screenshots", "shoot.mjs"), chromium, path, page}, shot.steps...)...)
		cmd.Env = append(os.Environ(), "PLAYWRIGHT_CORE_DIR="+pw)
		b, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("screenshot of %s: %v\n%s", page, err, b)
		}
		if st, err := os.Stat(path); err != nil || st.Size() < 10_000 {
			t.Fatalf("screenshot %s: %v", path, err)
		}
		t.Logf("%s: %s", path, page)
	}
}
