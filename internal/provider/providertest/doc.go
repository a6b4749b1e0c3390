// Package providertest is the provider conformance suite: one scenario matrix run over every
// owned adapter with its REAL binary (opencode and jam-testagent over ACP, codex app-server,
// claude stream-json, copilot --headless --stdio), driving provider.Runtime directly against
// the scripted model server (internal/testsupport/stubmodel), with no jam dev in between.
//
// The scenarios: a reply through Jam's tool (settled by jam_reply_to_message); a tool call
// retried under one call id (staged once); steering mid-turn; an interrupt (the turn ends
// Cancelled, the runtime goes on); a permission the broker denies (the agent carries on);
// exact resume in a new process (the model, or the test agent, remembers the earlier turn);
// a resume of an unknown thread (fails closed with ErrExactResumeUnavailable); the child
// killed mid-turn (the turn fails with ErrRuntimeExited, Exited closes, nothing is left);
// the child exiting during its handshake (Prepare fails cleanly, no orphan); a garbage and
// an oversized protocol message (garbage is survived; an oversized one is dropped or fails
// the runtime cleanly, as the adapter's capability row declares, never a hang).
//
// A capability an adapter lacks is declared in its row of the capability table
// (adapters_test.go), and the suite checks it is refused cleanly: the right error at once,
// and the runtime still usable.
//
// The real CLIs cannot be made to misbehave on their protocol stream, so the last three
// scenarios run them under cmd/jam-testwrap, a test-only stdio wrapper that passes the
// CLI's messages through whole and, on a signal, injects a garbage or an oversized message
// between two real ones, or exits after the first N bytes of the handshake. What is tested
// is then the REAL adapter's parsing and process handling against the REAL CLI's protocol,
// with only the fault added.
//
// Every adapter runs in parallel, and within an adapter the scenarios that need a runtime of
// their own run in parallel too; the scenarios that can share one runtime (reply, retry,
// steer, interrupt, permission, then resume from it) run in order on it, which saves a
// process start per scenario. A CLI whose start is heavy (opencode, a Bun app that compiles
// itself and opens its database) is bounded to fewer lanes at once (maxLanes) and warmed once
// (its plugin install cached per version under the user's cache directory); it is the
// suite's slow row on a busy two-core machine. The suite is the test files of this package:
// `go test ./internal/provider/providertest/`, with JAM_REQUIRE_REAL_AGENTS=1 failing
// instead of skipping when a CLI is missing.
package providertest
