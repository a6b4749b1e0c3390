package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/jam-dev/jam/internal/domain"
)

// Version is an `sbx` release.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Less orders releases.
func (v Version) Less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	return v.Patch < o.Patch
}

var versionPattern = regexp.MustCompile(`\bv?(\d+)\.(\d+)\.(\d+)\b`)

// ParseVersion finds the first release number in `sbx version` output ("sbx version
// v0.38.0", "Version: 0.38.0", ...).
func ParseVersion(out []byte) (Version, error) {
	m := versionPattern.FindSubmatch(out)
	if m == nil {
		return Version{}, fmt.Errorf("no version in %q", truncate(out))
	}
	var v Version
	v.Major, _ = strconv.Atoi(string(m[1]))
	v.Minor, _ = strconv.Atoi(string(m[2]))
	v.Patch, _ = strconv.Atoi(string(m[3]))
	return v, nil
}

// Sandbox is one entry of `sbx ls --json`.
type Sandbox struct {
	Name       string               `json:"name"`
	ID         string               `json:"id,omitempty"`
	Agent      string               `json:"agent"`
	Status     domain.SandboxStatus `json:"status"`
	Workspaces []string             `json:"workspaces,omitempty"`
	CreatedAt  *time.Time           `json:"created_at,omitempty"`
	LastUsedAt *time.Time           `json:"last_used_at,omitempty"`
}

// ErrUnparsable: `sbx` printed something that is not the JSON the driver asked for.
var ErrUnparsable = errors.New("unparsable sbx output")

// ParseList reads `sbx ls --json`: an object {"sandboxes": [...]} (v0.38) or a bare array
// (older builds), after any non-JSON lines (notices, upgrade hints) before it. Unknown fields
// are ignored; a missing "id" is fine.
func ParseList(out []byte) ([]Sandbox, error) {
	start := -1
	for i, line := range bytes.SplitAfter(out, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
			start = offsetOfLine(out, i)
			break
		}
	}
	if start < 0 {
		if len(bytes.TrimSpace(out)) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: no JSON in %q", ErrUnparsable, truncate(out))
	}
	body := bytes.TrimSpace(out[start:])
	var list []Sandbox
	if body[0] == '[' {
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnparsable, err)
		}
		return list, nil
	}
	var obj struct {
		Sandboxes []Sandbox `json:"sandboxes"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnparsable, err)
	}
	return obj.Sandboxes, nil
}

func offsetOfLine(out []byte, n int) int {
	off := 0
	for i, line := range bytes.SplitAfter(out, []byte("\n")) {
		if i == n {
			return off
		}
		off += len(line)
	}
	return off
}

func truncate(b []byte) string { return domain.Truncate(string(b), 200) }
