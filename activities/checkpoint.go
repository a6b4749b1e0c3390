package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/checkpoint"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/workspace"
)

// Checkpoints holds the node activities that capture a runtime host's provider state. It is
// registered only on the node's queue: the state and its generations live on this machine.
type Checkpoints struct {
	Store  *store.Store
	Layout domain.Layout
	// Limits bounds a capture (checkpoint.DefaultLimits when zero).
	Limits checkpoint.Limits
}

// CaptureCheckpointInput asks for one generation of a host's provider state. ID is minted by
// the workflow, so a retried activity publishes (or finds) the same generation.
type CaptureCheckpointInput struct {
	Host   uuid.UUID               `json:"host"`
	ID     uuid.UUID               `json:"id"`
	Reason domain.CheckpointReason `json:"reason"`
}

// CaptureCheckpoint captures the provider state of a quiesced host (no member turn runs: the
// caller holds the host quiesced or no member is live) as a new immutable generation, linked
// against the newest one whose payload is kept, then records it. A crash between the
// manifest and the record is repaired by the retry: the published generation is found and
// the identical record inserted.
func (c *Checkpoints) CaptureCheckpoint(ctx context.Context, in CaptureCheckpointInput) (contract.CaptureCheckpointResult, error) {
	h, err := c.Store.GetRuntimeHost(ctx, in.Host)
	if err != nil {
		return contract.CaptureCheckpointResult{}, err
	}
	members, err := c.Store.HostMembers(ctx, in.Host)
	if err != nil {
		return contract.CaptureCheckpointResult{}, err
	}
	var (
		sessions []checkpoint.Session
		provider domain.Provider
		version  string
	)
	for _, m := range members {
		hs, err := c.Store.GetHostSession(ctx, m.RuntimeSession)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return contract.CaptureCheckpointResult{}, err
		}
		row, _ := domain.LookupTransport(hs.Config.Transport)
		if provider == "" {
			provider = row.Provider
		}
		if version == "" {
			// Members of one host run one template, hence one provider build.
			version = hs.ProviderVersion
		}
		sessions = append(sessions, checkpoint.Session{RuntimeSession: hs.RuntimeSessionID, ProviderSessionID: hs.ProviderSessionID})
	}
	if provider == "" {
		return contract.CaptureCheckpointResult{ID: in.ID, Skipped: true}, nil
	}
	paths, err := workspace.ManagedPaths(c.Layout, h.ID)
	if err != nil {
		return contract.CaptureCheckpointResult{}, err
	}
	src, err := paths.ProviderState(provider)
	if err != nil {
		return contract.CaptureCheckpointResult{}, err
	}
	held, err := holdsFiles(src)
	if err != nil {
		return contract.CaptureCheckpointResult{}, fmt.Errorf("provider state of %s: %w", h.ID, err) // unreadable is not empty
	}
	if !held {
		// Nothing on disk (never written, or lost): a generation would claim sessions it
		// does not hold.
		return contract.CaptureCheckpointResult{ID: in.ID, Skipped: true}, nil
	}
	gens := checkpoint.Store{Root: paths.Checkpoints()}
	req := checkpoint.CaptureRequest{Meta: checkpoint.Meta{ID: in.ID, Host: h.ID, Reason: in.Reason, Provider: provider,
		ProviderVersion: version, Sessions: sessions}, Source: src, Limits: c.Limits, At: time.Now()}
	if prev, err := c.Store.ListCheckpoints(ctx, h.ID); err != nil {
		return contract.CaptureCheckpointResult{}, err
	} else {
		for _, p := range prev {
			if p.ID != in.ID && p.PayloadDeletedAt == nil {
				req.Previous = &p.ID
				break
			}
		}
	}
	stop := heartbeat(ctx)
	m, err := gens.Capture(ctx, req)
	stop()
	if errors.Is(err, checkpoint.ErrTooLarge) || errors.Is(err, checkpoint.ErrConflict) {
		return contract.CaptureCheckpointResult{}, contract.Fail(err.Error(), domain.ErrTypeCheckpointRefused, err)
	}
	if err != nil {
		return contract.CaptureCheckpointResult{}, err
	}
	rec := domain.ProviderCheckpoint{ID: m.ID, RuntimeHostID: h.ID, Reason: m.Reason, Provider: m.Provider,
		ProviderVersion: m.ProviderVersion, ManifestChecksum: m.Checksum, PayloadBytes: m.Bytes, CreatedAt: m.CreatedAt}
	for _, s := range m.Sessions {
		rec.Sessions = append(rec.Sessions, domain.CheckpointSession{RuntimeSession: s.RuntimeSession, ProviderSessionID: s.ProviderSessionID})
	}
	if _, err := c.Store.InsertCheckpoint(ctx, rec); err != nil {
		if errors.Is(err, store.ErrCheckpointChanged) {
			return contract.CaptureCheckpointResult{}, contract.Fail(err.Error(), domain.ErrTypeCheckpointRefused, err)
		}
		return contract.CaptureCheckpointResult{}, fmt.Errorf("record checkpoint %s: %w", m.ID, err)
	}
	out := contract.CaptureCheckpointResult{ID: m.ID, Files: len(m.Files), PayloadBytes: m.Bytes}
	for _, f := range m.Files {
		if f.Linked {
			out.Linked++
		}
	}
	return out, nil
}

// errFound stops a walk at the first file.
var errFound = errors.New("found")

// holdsFiles reports whether dir holds anything but (empty) directories; a missing dir
// holds nothing. Jam makes the state directories a provider is pointed at, so their
// presence alone says nothing was written.
func holdsFiles(dir string) (bool, error) {
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return errFound
		}
		return nil
	})
	switch {
	case errors.Is(err, errFound):
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}
