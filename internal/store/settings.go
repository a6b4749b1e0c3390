package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jam-dev/jam/internal/domain"
)

// SettingValue is a stored setting.
type SettingValue struct {
	Key       string
	Value     json.RawMessage
	UpdatedAt time.Time
}

type settingRow struct {
	Key       string    `db:"key"`
	Value     string    `db:"value"`
	UpdatedAt time.Time `db:"updated_at"`
}

func (r settingRow) value() SettingValue {
	return SettingValue{Key: r.Key, Value: json.RawMessage(r.Value), UpdatedAt: utc(r.UpdatedAt)}
}

// PutSetting validates and stores a registered setting.
func (q *Q) PutSetting(ctx context.Context, key string, value json.RawMessage, at time.Time) error {
	s, ok := domain.LookupSetting(key)
	if !ok {
		return fmt.Errorf("put setting %q: %w", key, ErrNotFound)
	}
	if err := s.Validate(value); err != nil {
		return err
	}
	compact, err := compactJSON(value)
	if err != nil {
		return err
	}
	_, err = q.exec(ctx, `
INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		key, compact, domain.Timestamp(at))
	if err != nil {
		return fmt.Errorf("put setting %q: %w", key, err)
	}
	return nil
}

// GetSetting reads a stored setting; ErrNotFound when it was never set.
func (q *Q) GetSetting(ctx context.Context, key string) (SettingValue, error) {
	var r settingRow
	if err := q.get(ctx, &r, `SELECT key, value, updated_at FROM settings WHERE key = ?`, key); err != nil {
		return SettingValue{}, fmt.Errorf("get setting %q: %w", key, err)
	}
	return r.value(), nil
}

// ListSettings reads every stored setting by key.
func (q *Q) ListSettings(ctx context.Context) ([]SettingValue, error) {
	var rows []settingRow
	if err := q.selectAll(ctx, &rows, `SELECT key, value, updated_at FROM settings ORDER BY key`); err != nil {
		return nil, fmt.Errorf("list settings: %w", err)
	}
	out := make([]SettingValue, len(rows))
	for i, r := range rows {
		out[i] = r.value()
	}
	return out, nil
}

func compactJSON(raw json.RawMessage) (string, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", &domain.ValidationError{Field: "value", Detail: "must be JSON"}
	}
	return buf.String(), nil
}
