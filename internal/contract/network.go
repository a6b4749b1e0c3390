package contract

import (
	"time"

	"github.com/jam-dev/jam/internal/domain"
)

// HostNetworkTimeout bounds a network inspection: the journal, the readiness checks (15 s
// in all) and the pickup.
const HostNetworkTimeout = 30 * time.Second

// NetworkReport is a sandbox's network journal and a read-only readiness check of the
// targets its host needs.
type NetworkReport struct {
	Sandbox string               `json:"sandbox"`
	Entries []domain.NetworkRule `json:"entries"`
	// Wanted is every target checked: the members' needs and what the journal still holds.
	Wanted    []string       `json:"wanted"`
	Readiness []NetworkCheck `json:"readiness"`
}

// NetworkCheck is what the readiness check found for one target.
type NetworkCheck struct {
	Target string                  `json:"target"`
	Result domain.NetworkReadiness `json:"result"`
}
