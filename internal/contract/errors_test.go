package contract

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/jam-dev/jam/internal/domain"
)

var snake = regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)

func TestEveryErrorTypeIsDeclaredOnceWithASnakeCaseNameAndAnHTTPClass(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range domain.ErrorTypes() {
		name := string(c.Type)
		if !snake.MatchString(name) {
			t.Errorf("%q is not snake_case", name)
		}
		if seen[name] || (c.Legacy != "" && seen[c.Legacy]) {
			t.Errorf("%q declared twice", name)
		}
		seen[name], seen[c.Legacy] = true, true
		if c.Status < 400 || c.Status > 599 || c.Code == "" {
			t.Errorf("%q: status %d code %q", name, c.Status, c.Code)
		}
		if !c.Worded && c.Message == "" {
			t.Errorf("%q: neither a public message nor a worded one", name)
		}
	}
}

func TestFailRaisesWhatTheTableSaysAndLegacyNamesClassifyTheSame(t *testing.T) {
	err := fmt.Errorf("acquire: %w", Fail("another host control is running", domain.ErrTypeHostBusy, errors.New("cause")))
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || app.Type() != "host_busy" {
		t.Fatalf("Fail built %+v", app)
	}
	if !Is(err, domain.ErrTypeHostBusy) || Is(err, domain.ErrTypeHostScope) {
		t.Fatal("Is does not match by type")
	}
	cls, msg, ok := Classify(err)
	if !ok || cls.Status != http.StatusConflict || cls.PublicMessage(msg) != "another host control is running" {
		t.Fatalf("classified %+v %q", cls, msg)
	}
	// A history written before the table raised CamelCase names.
	old := temporal.NewNonRetryableApplicationError("gone", "RuntimeNotLive", nil)
	if !Is(old, domain.ErrTypeRuntimeNotLive) {
		t.Fatal("the legacy name does not classify")
	}
	if p := Retry(temporal.RetryPolicy{MaximumAttempts: 3}); p.MaximumAttempts != 3 ||
		!slices.Contains(p.NonRetryableErrorTypes, "host_busy") || !slices.Contains(p.NonRetryableErrorTypes, "RuntimeNotLive") {
		t.Fatalf("retry policy %+v", p)
	}
	// An unworded class never shows the raiser's text (it may hold paths or provider output).
	cls, msg, _ = Classify(Fail("sbx at /secret/path failed", domain.ErrTypeOwnershipMismatch, nil))
	if got := cls.PublicMessage(msg); got != "the sandbox is not provably Jam's; nothing was destroyed" {
		t.Fatalf("public message %q", got)
	}
}
