package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/privatefile"
)

// hostStoreIDFile, in a host store, names the store: nodes that read the same id at the
// same path reach the same runtime-host roots.
const hostStoreIDFile = ".jam-host-store"

// HostStoreIdentity is the identity of the host store at dir, "<id>:<absolute path>": the id
// the store's identity file holds (written once, by the first node that used the store) and
// the path this node reaches it at. A directory on a shared filesystem reads the same id on
// every node that mounts it; a node's own disk never does. The path is part of it because
// host roots are reached by path (a provider's state may record its working directory), so
// nodes mounting one store at different paths do not share it.
func HostStoreIdentity(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("host store %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("create host store %s: %w", abs, err)
	}
	path := filepath.Join(abs, hostStoreIDFile)
	// Two nodes starting at once on a new store: one creates the file, both read it.
	if _, err := privatefile.Create(path, []byte(uuid.NewString()+"\n")); err != nil {
		return "", fmt.Errorf("name host store %s: %w", abs, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read host store identity %s: %w", path, err)
	}
	id, err := uuid.Parse(strings.TrimSpace(string(b)))
	if err != nil {
		return "", fmt.Errorf("host store identity %s: not a UUID; restore it from another node of the store, or remove it if no other node uses this store", path)
	}
	return id.String() + ":" + abs, nil
}
