package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// startFailure classifies why the provider of hs did not start on node (what the registry's
// Start returned: the adapter's build and Prepare), for the workflow: a failure retrying
// cannot fix is non-retryable with the type its session is held failed under; a node that is
// stopping, or an attempt cancelled, is retried as it is; anything else the provider did (it
// exited, refused its handshake) is start_failed, retried by the activity and held failed
// once every attempt failed. Every adapter's Prepare errors are in the table test
// TestEveryPrepareErrorIsClassified.
func startFailure(ctx context.Context, err error, row domain.TransportSpec, hs domain.HostSession, node string) error {
	// What the provider said may quote its own output: no secret of it goes further.
	said := (&provider.Redactor{}).Redact(domain.Truncate(err.Error(), 500))
	switch {
	case errors.Is(err, provider.ErrExactResumeUnavailable):
		return contract.Fail(fmt.Sprintf("runtime session %s cannot resume provider session %s exactly: %s", hs.RuntimeSessionID,
			domain.Truncate(hs.ProviderSessionID, 100), said), domain.ErrTypeExactResume, err)
	case errors.Is(err, provider.ErrNoAdapter):
		return contract.Fail(fmt.Sprintf("node has no runtime adapter for transport %s", hs.Config.Transport),
			domain.ErrTypeAdapterMissing, err)
	case errors.Is(err, provider.ErrNotReady):
		// Not retried: a provider that stays silent this long needs its template looked at,
		// and each attempt would hold the room "starting" for the whole bound again.
		return contract.Fail(fmt.Sprintf("%s did not become ready: %s", row.Label, said), domain.ErrTypeNotReady, err)
	case errors.Is(err, provider.ErrCredentialMissing):
		return contract.Fail(fmt.Sprintf("%s cannot start on node %s: %s; set it in the node's environment and restart the node, or change the template",
			row.Label, node, said), domain.ErrTypeCredentialMissing, err)
	case errors.Is(err, provider.ErrSpawn), errors.Is(err, provider.ErrIncompatible):
		return contract.Fail(fmt.Sprintf("%s on node %s: %s", row.Label, node, said), domain.ErrTypeExecutableRefused, err)
	case errors.Is(err, provider.ErrInvalidSpec):
		return contract.Fail(fmt.Sprintf("%s: %s", row.Label, said), domain.ErrTypeValidation, err)
	case errors.Is(err, provider.ErrShuttingDown), ctx.Err() != nil:
		return fmt.Errorf("start runtime %s: %w", hs.RuntimeSessionID, err)
	}
	return contract.Fail(fmt.Sprintf("%s failed to start on node %s: %s", row.Label, node, said), domain.ErrTypeStartFailed, err)
}

// missingKey checks, before anything starts, that the model provider's key variable the
// template names is set in the environment the provider will see (env: inside its sandbox
// when it runs in one): a provider started without it fails at its first turn, retried for
// nothing (issue 43), so the start fails at once, classified.
func missingKey(row domain.TransportSpec, c domain.TemplateConfig, env []string) error {
	name := c.Settings[domain.SettingKeyProviderEnvKey]
	if name == "" {
		return nil
	}
	if v := envLookup(env)(name); v != "" {
		return nil
	}
	return fmt.Errorf("%w: the model provider's key variable %s is not set for %s", provider.ErrCredentialMissing, name, row.Label)
}
