package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// TypeGitHubReadiness asks a workspace's node whether its guest can reach and authenticate
// to GitHub repositories. It reads only.
const TypeGitHubReadiness = "GitHubReadiness"

// GitHubReadinessTimeout bounds the whole check: the guest's 12 s aggregate plus the
// ownership proof and the credential inventory.
const GitHubReadinessTimeout = 45 * time.Second

// GitHubReadinessInput names a workspace on its node and the repositories (owner/name) to
// check.
type GitHubReadinessInput struct {
	Node  string       `json:"node"`
	Ref   WorkspaceRef `json:"ref"`
	Repos []string     `json:"repos,omitempty"`
}

func (in GitHubReadinessInput) SearchTags() Tags { return Tags{Workspace: in.Ref.Workspace} }

// GitHubReadinessID is one workspace's check of one set of repositories: concurrent
// requests for the same set share a run, another set gets its own.
func GitHubReadinessID(workspace uuid.UUID, repos []string) string {
	sum := sha256.Sum256([]byte(strings.Join(repos, "\n")))
	return uuidID(TypeGitHubReadiness, workspace) + "/" + hex.EncodeToString(sum[:6])
}

// GitHubReadiness is what the check found. Nothing secret is read: the credential is
// known stored or not from Docker's inventory, and the guest's gh authenticates through
// Docker's proxy.
type GitHubReadiness struct {
	// Available is false when the check could not run at all (Reason says why).
	Available bool   `json:"available"`
	Reason    string `json:"reason,omitempty"`
	// CredentialStored: Docker holds a global GitHub service secret (sbx secret ls -g
	// --service github); nil when the inventory could not be read.
	CredentialStored *bool  `json:"credential_stored,omitempty"`
	Git              string `json:"git,omitempty"`
	GH               string `json:"gh,omitempty"`
	// Authenticated: gh auth status --hostname github.com succeeded in the guest.
	Authenticated bool               `json:"authenticated"`
	AuthDetail    string             `json:"auth_detail,omitempty"`
	Repositories  []GitHubRepoStatus `json:"repositories"`
	// TimedOut: the 12 s aggregate ran out; repositories not reached say timeout.
	TimedOut bool `json:"timed_out,omitempty"`
}

// GitHubRepoStatus is one repository's answer.
type GitHubRepoStatus struct {
	Repo string `json:"repo"`
	// Status: not_found is absent, or private and not visible to the credential.
	Status domain.GitHubRepoState `json:"status"`
	Detail string                 `json:"detail,omitempty"`
}
