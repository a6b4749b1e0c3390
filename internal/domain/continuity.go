package domain

// ContinuityStatus is what continuity inspection concludes about a runtime host: whether
// every bound provider session can be resumed exactly from its newest checkpoint.
type ContinuityStatus string

const (
	ContinuityHealthy ContinuityStatus = "healthy"
	// ContinuityMissing: a session is bound to a provider identity but no checkpoint exists.
	ContinuityMissing ContinuityStatus = "missing"
	// ContinuityCorrupt: the newest checkpoint does not verify on disk.
	ContinuityCorrupt ContinuityStatus = "corrupt"
	// ContinuitySessionNotCaptured: a bound session is not in the newest checkpoint.
	ContinuitySessionNotCaptured ContinuityStatus = "session_not_captured"
	// ContinuityProviderVersionMismatch: the newest checkpoint was taken by another provider
	// version than the one that would resume it (both known).
	ContinuityProviderVersionMismatch ContinuityStatus = "provider_version_mismatch"
	// ContinuityResumeFailed: the latest resume of a session from the newest checkpoint failed.
	ContinuityResumeFailed ContinuityStatus = "resume_failed"
)

var ContinuityStatuses = NewEnum("continuity_status", ContinuityHealthy, ContinuityMissing, ContinuityCorrupt,
	ContinuitySessionNotCaptured, ContinuityProviderVersionMismatch, ContinuityResumeFailed)

func (v *ContinuityStatus) UnmarshalText(b []byte) error {
	return unmarshalEnum(ContinuityStatuses, b, v)
}
