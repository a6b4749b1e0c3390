package domain

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// agentKeyPrefix marks an attached agent's API key, so a leaked one is recognisable.
const agentKeyPrefix = "jam_agent_"

// NewAgentKey returns a fresh API key for an attached agent (shown once) and its hash (stored).
func NewAgentKey() (key, hash string, err error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", "", fmt.Errorf("generate agent key: %w", err)
	}
	key = agentKeyPrefix + base64.RawURLEncoding.EncodeToString(raw)
	return key, HashAgentKey(key), nil
}

// HashAgentKey is the stored form of a key. The key carries 256 random bits, so a plain
// SHA-256 is enough: there is nothing to brute-force.
func HashAgentKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// LooksLikeAgentKey reports whether a bearer token has the agent key shape.
func LooksLikeAgentKey(token string) bool { return strings.HasPrefix(token, agentKeyPrefix) }
