package sandbox

import "context"

// Verify proves the named sandbox is Jam's (its stored plan names this owner and the guest
// holds the marker's nonce) before anything runs in it on an operator's or agent's behalf.
func (m *Manager) Verify(ctx context.Context, owner OwnerKey, name string) error {
	_, err := m.owned(ctx, owner, name)
	return err
}
