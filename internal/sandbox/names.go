package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// MaxNameLen bounds a derived sandbox name.
const MaxNameLen = 63

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidateName accepts only names DeriveName can produce, so nothing else ever reaches an
// `sbx` argv as a sandbox name.
func ValidateName(name string) error {
	if !namePattern.MatchString(name) {
		return &domain.ValidationError{Field: "sandbox", Detail: fmt.Sprintf("%q is not a Jam sandbox name", name)}
	}
	return nil
}

// DeriveName is a sandbox's name: a sanitized prefix and the first 16 hex characters of
// SHA-256 over the agent UUID and the owner UUID (runtime host, or legacy runtime session).
// Room ids, aliases and display names never enter it.
func DeriveName(prefix string, agent, owner uuid.UUID) string {
	sum := sha256.Sum256([]byte(agent.String() + ":" + owner.String()))
	suffix := hex.EncodeToString(sum[:])[:16]
	p := sanitize(prefix)
	if max := MaxNameLen - len(suffix) - 1; len(p) > max {
		p = strings.TrimRight(p[:max], "-")
	}
	if p == "" {
		p = "jam"
	}
	return p + "-" + suffix
}

func sanitize(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimRight(b.String(), "-")
}
