package domain

import "net/http"

// ErrorType is the wire name of an error that crosses Temporal: the type of the
// ApplicationError an activity, validator or workflow raises. Every such error is declared
// once, in errorTable, with whether retrying can help and what an API client is told.
type ErrorType string

const (
	ErrTypeValidation           ErrorType = "validation"
	ErrTypeRetired              ErrorType = "retired"
	ErrTypeOwnershipMismatch    ErrorType = "ownership_mismatch"
	ErrTypeSandboxUnavailable   ErrorType = "sandbox_unavailable"
	ErrTypeCredentialMissing    ErrorType = "credential_missing"
	ErrTypeWorkspaceCorrupt     ErrorType = "workspace_needs_reconciliation"
	ErrTypeNoSandbox            ErrorType = "no_sandbox"
	ErrTypeRuntimeNotLive       ErrorType = "runtime_not_live"
	ErrTypeExactResume          ErrorType = "exact_resume_unavailable"
	ErrTypeNoSession            ErrorType = "runtime_session_gone"
	ErrTypeExecutableRefused    ErrorType = "executable_refused"
	ErrTypeUnsupportedTransport ErrorType = "unsupported_transport"
	ErrTypeAdapterMissing       ErrorType = "adapter_missing"
	ErrTypeNotReady             ErrorType = "runtime_not_ready"
	ErrTypeEnvRefused           ErrorType = "env_refused"
	ErrTypeRetained             ErrorType = "retained"
	ErrTypeOperationRunning     ErrorType = "operation_running"
	ErrTypeWorkspaceRefused     ErrorType = "workspace_refused"
	ErrTypeRemovalBlocked       ErrorType = "removal_blocked"
	ErrTypeCleanupBlocked       ErrorType = "cleanup_blocked"
	ErrTypeWorkspaceArchived    ErrorType = "workspace_archived"
	ErrTypeCheckpointRefused    ErrorType = "checkpoint_refused"
	ErrTypeIncompatibleHost     ErrorType = "incompatible_host"
	ErrTypeHostBusy             ErrorType = "host_busy"
	ErrTypeHostScope            ErrorType = "host_scope"
	ErrTypeHostReplacing        ErrorType = "host_replacing"
	ErrTypeSuperseded           ErrorType = "superseded"
	ErrTypeEvidenceChanged      ErrorType = "evidence_changed"
	ErrTypeNotResettable        ErrorType = "not_resettable"
	// ErrTypeNetworkDenied: the organisation's governance forbids a target the sandbox needs.
	ErrTypeNetworkDenied ErrorType = "network_denied"
	// ErrTypeNetworkAmbiguous: a policy mutation left more than one candidate rule; Jam
	// claims none and an operator must look.
	ErrTypeNetworkAmbiguous  ErrorType = "network_policy_ambiguous"
	ErrTypeRepoCommandFailed ErrorType = "repository_command_failed"
	// ErrTypeHostFenced: the checkpoint of the host's last teardown failed; no member starts
	// (and no host restart runs) until a checkpoint succeeds or an operator discards it.
	ErrTypeHostFenced ErrorType = "host_fenced"
	// ErrTypeStartFailed: the provider failed its start (it exited or refused the
	// handshake). Retried by the activity; a session whose every attempt failed holds failed.
	ErrTypeStartFailed ErrorType = "start_failed"
)

// Error codes of the API's one JSON error shape.
const (
	CodeValidation       = "validation"
	CodeMalformedBody    = "malformed_body"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeTooLarge         = "payload_too_large"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodePrecondition     = "precondition_failed"
	CodeInternal         = "internal"
	CodeNotReady         = "not_ready"
	CodeUnavailable      = "unavailable"
	CodeTimeout          = "timeout"
	CodeUpstream         = "upstream_failed"
	CodeCanceled         = "canceled"
	// CodeAgentStopped: the agent whose key made the request is stopped (403) until an
	// operator starts it.
	CodeAgentStopped = "agent_stopped"
)

// ErrorClass is one row of the error table.
type ErrorClass struct {
	Type ErrorType
	// Legacy is the name earlier code raised for this error; recorded histories and
	// activities still running on an older worker carry it, so it classifies the same.
	Legacy string
	// Retryable: retrying the same activity can succeed. Retry policies list every type
	// that is not (NonRetryableErrorTypes).
	Retryable bool
	// Status and Code are what the API answers.
	Status int
	Code   string
	// Message is what a client is told. Worded: the raising code words its message for
	// people (fixed text and validated values, never paths or provider output), so it is
	// shown after Message.
	Message string
	Worded  bool
}

var errorTable = []ErrorClass{
	{Type: ErrTypeValidation, Status: http.StatusBadRequest, Code: CodeValidation, Message: "the request was rejected", Worded: true},
	{Type: ErrTypeRetired, Status: http.StatusConflict, Code: CodeConflict, Message: "the session's room binding was removed"},
	{Type: ErrTypeOwnershipMismatch, Status: http.StatusConflict, Code: CodeConflict, Message: "the sandbox is not provably Jam's; nothing was destroyed"},
	{Type: ErrTypeSandboxUnavailable, Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "no usable sandbox runtime on the node"},
	{Type: ErrTypeCredentialMissing, Status: http.StatusUnprocessableEntity, Code: CodePrecondition, Message: "a credential the template names is missing"},
	{Type: ErrTypeWorkspaceCorrupt, Status: http.StatusConflict, Code: CodeConflict, Message: "the workspace needs reconciliation"},
	{Type: ErrTypeNoSandbox, Status: http.StatusConflict, Code: CodeConflict, Message: "the runtime host runs without a sandbox"},
	{Type: ErrTypeRuntimeNotLive, Legacy: "RuntimeNotLive", Status: http.StatusConflict, Code: CodeConflict, Message: "the runtime is not live"},
	{Type: ErrTypeExactResume, Legacy: "ExactResumeUnavailable", Status: http.StatusConflict, Code: CodeConflict, Message: "the provider thread cannot be resumed exactly"},
	{Type: ErrTypeNoSession, Legacy: "RuntimeSessionGone", Status: http.StatusNotFound, Code: CodeNotFound, Message: "the runtime session is gone"},
	{Type: ErrTypeExecutableRefused, Legacy: "ExecutableRefused", Status: http.StatusUnprocessableEntity, Code: CodePrecondition, Message: "the provider executable was refused"},
	{Type: ErrTypeUnsupportedTransport, Legacy: "UnsupportedTransport", Status: http.StatusUnprocessableEntity, Code: CodePrecondition, Message: "the transport is not supported here"},
	{Type: ErrTypeAdapterMissing, Status: http.StatusUnprocessableEntity, Code: CodePrecondition, Message: "no live node has an adapter for this provider"},
	{Type: ErrTypeNotReady, Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the provider did not become ready"},
	{Type: ErrTypeEnvRefused, Status: http.StatusUnprocessableEntity, Code: CodePrecondition, Message: "an environment variable for the runtime was refused"},
	{Type: ErrTypeRetained, Status: http.StatusConflict, Code: CodeConflict, Worded: true},
	{Type: ErrTypeOperationRunning, Status: http.StatusConflict, Code: CodeConflict, Worded: true},
	{Type: ErrTypeWorkspaceRefused, Status: http.StatusConflict, Code: CodeConflict, Worded: true},
	{Type: ErrTypeRemovalBlocked, Status: http.StatusConflict, Code: CodeConflict, Worded: true},
	{Type: ErrTypeCleanupBlocked, Status: http.StatusConflict, Code: CodeConflict, Worded: true},
	{Type: ErrTypeWorkspaceArchived, Status: http.StatusConflict, Code: CodeConflict, Worded: true},
	{Type: ErrTypeCheckpointRefused, Status: http.StatusConflict, Code: CodeConflict, Message: "the checkpoint was refused"},
	{Type: ErrTypeIncompatibleHost, Status: http.StatusConflict, Code: CodeConflict, Message: "the runtime host is not compatible with the session's template"},
	{Type: ErrTypeHostBusy, Status: http.StatusConflict, Code: CodeConflict, Worded: true},
	{Type: ErrTypeHostScope, Status: http.StatusConflict, Code: CodeConflict, Message: "the host's members cannot be controlled as one", Worded: true},
	{Type: ErrTypeHostReplacing, Status: http.StatusConflict, Code: CodeConflict, Worded: true},
	{Type: ErrTypeSuperseded, Status: http.StatusConflict, Code: CodeConflict, Message: "a newer template generation superseded this one"},
	{Type: ErrTypeEvidenceChanged, Status: http.StatusConflict, Code: CodeConflict, Message: "the continuity evidence changed; inspect again and confirm what you see"},
	{Type: ErrTypeNotResettable, Status: http.StatusConflict, Code: CodeConflict, Message: "start-fresh is not offered", Worded: true},
	{Type: ErrTypeNetworkDenied, Status: http.StatusUnprocessableEntity, Code: CodePrecondition, Message: "the organisation's network policy forbids a target the sandbox needs", Worded: true},
	{Type: ErrTypeNetworkAmbiguous, Status: http.StatusConflict, Code: CodeConflict, Message: "the sandbox's network rules are ambiguous; nothing was claimed", Worded: true},
	// The operation's record keeps git's or gh's bounded message; the API says only this.
	{Type: ErrTypeRepoCommandFailed, Status: http.StatusUnprocessableEntity, Code: CodeUpstream, Message: "a git or gh command in the workspace failed; the operation's error says why"},
	{Type: ErrTypeHostFenced, Status: http.StatusConflict, Code: CodeConflict, Message: "the host's provider state is not checkpointed", Worded: true},
	{Type: ErrTypeStartFailed, Retryable: true, Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the provider failed to start"},
}

var errorIndex = func() map[string]ErrorClass {
	m := make(map[string]ErrorClass, 2*len(errorTable))
	for _, c := range errorTable {
		m[string(c.Type)] = c
		if c.Legacy != "" {
			m[c.Legacy] = c
		}
	}
	return m
}()

// ErrorClassOf finds the table row of an ApplicationError type (current or legacy name).
func ErrorClassOf(typ string) (ErrorClass, bool) {
	c, ok := errorIndex[typ]
	return c, ok
}

// Matches reports whether an ApplicationError type names this error (its current or legacy name).
func (t ErrorType) Matches(typ string) bool {
	c, ok := errorIndex[typ]
	return ok && c.Type == t
}

// Retryable reports what the table says about t; an unknown type is retryable (Temporal's default).
func (t ErrorType) Retryable() bool {
	c, ok := errorIndex[string(t)]
	return !ok || c.Retryable
}

// NonRetryableErrorTypes lists every type (and legacy name) that retrying cannot fix, for
// activity retry policies.
func NonRetryableErrorTypes() []string {
	var out []string
	for _, c := range errorTable {
		if c.Retryable {
			continue
		}
		out = append(out, string(c.Type))
		if c.Legacy != "" {
			out = append(out, c.Legacy)
		}
	}
	return out
}

// ErrorTypes lists the table, in declaration order.
func ErrorTypes() []ErrorClass { return append([]ErrorClass(nil), errorTable...) }

// PublicMessage is what a client is told for an error of this class whose raiser said msg.
func (c ErrorClass) PublicMessage(msg string) string {
	switch {
	case !c.Worded || msg == "":
		if c.Message == "" {
			return "the operation was refused"
		}
		return c.Message
	case c.Message == "":
		return msg
	}
	return c.Message + ": " + msg
}
