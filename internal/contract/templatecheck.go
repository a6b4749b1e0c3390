package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jam-dev/jam/internal/domain"
)

// TypeTemplateCheck asks a node, read-only, whether a template being saved could start there:
// which variables its env_allowlist names that the node's worker does not have, and whether
// its command resolves (existence and the executable bit; nothing is run).
const TypeTemplateCheck = "TemplateCheck"

// TemplateCheckTimeout bounds one node's answer, pickup included: a save waits at most this
// long for every node it asks, and a node that has not answered by then does not hold it.
// The check reads a setting and a few files.
const TemplateCheckTimeout = 3 * time.Second

// TemplateCheckInput is the part of a template the node judges.
type TemplateCheckInput struct {
	Node      string           `json:"node"`
	Transport domain.Transport `json:"transport"`
	// Command is the template's explicit path ("" resolves the transport's default command).
	Command string `json:"command,omitempty"`
	// Env are the template's env_allowlist names.
	Env []string `json:"env,omitempty"`
	// Sandboxed: the provider runs in a sandbox, where its command is the guest's, not the
	// node's; only the variables (the guest's come from the worker's environment) are judged.
	Sandboxed bool `json:"sandboxed,omitempty"`
}

// TemplateCheckID is one node's check of one question: concurrent saves asking the same share a
// run, another question gets its own.
func TemplateCheckID(in TemplateCheckInput) string {
	q, _ := json.Marshal(TemplateCheckInput{Transport: in.Transport, Command: in.Command, Env: in.Env, Sandboxed: in.Sandboxed})
	sum := sha256.Sum256(q)
	return TypeTemplateCheck + ":" + in.Node + "/" + hex.EncodeToString(sum[:6])
}

// ParseTemplateCheckID inverts TemplateCheckID to its node.
func ParseTemplateCheckID(id string) (string, error) {
	key, err := keyOf(TypeTemplateCheck, id)
	if err != nil {
		return "", err
	}
	node, sum, ok := strings.Cut(key, "/")
	if !ok || len(sum) != 12 || strings.Trim(sum, "0123456789abcdef") != "" {
		return "", fmt.Errorf("workflow id %q: want %s:<node>/<12 hex digits>", id, TypeTemplateCheck)
	}
	if err := domain.ValidateNodeName(node); err != nil {
		return "", fmt.Errorf("workflow id %q: %w", id, err)
	}
	return node, nil
}

// TemplateCheck is a node's answer.
type TemplateCheck struct {
	Node string `json:"node"`
	// MissingEnv are the allowlisted names not set in the worker's environment.
	MissingEnv []string `json:"missing_env,omitempty"`
	// Command is the resolution of the command; nil when not judged (sandboxed).
	Command *CommandCheck `json:"command,omitempty"`
}

// CommandCheck is where a command resolved on a node, or why it did not.
type CommandCheck struct {
	// Command is the catalog command (codex, claude, ...); Explicit the template's path.
	Command  string `json:"command"`
	Explicit string `json:"explicit,omitempty"`
	// Path and Source are what it resolved to (provider.ExecutableSource).
	Path   string `json:"path,omitempty"`
	Source string `json:"source,omitempty"`
	// Problem says why it does not resolve: the candidates tried and the fix ("" when it does).
	Problem string `json:"problem,omitempty"`
}
