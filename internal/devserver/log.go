package devserver

import (
	"context"
	"log/slog"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// slogLogger adapts the server's tagged logger to slog with its own level, so the embedded
// server can be quieter than Jam itself.
type slogLogger struct {
	log   *slog.Logger
	level *slog.LevelVar
}

var (
	_ log.Logger      = slogLogger{}
	_ log.SLogWrapper = slogLogger{}
)

func (s slogLogger) Debug(msg string, tags ...tag.Tag) { s.emit(slog.LevelDebug, msg, tags) }
func (s slogLogger) Info(msg string, tags ...tag.Tag)  { s.emit(slog.LevelInfo, msg, tags) }
func (s slogLogger) Warn(msg string, tags ...tag.Tag)  { s.emit(slog.LevelWarn, msg, tags) }
func (s slogLogger) Error(msg string, tags ...tag.Tag) { s.emit(slog.LevelError, msg, tags) }

// The server's panic and fatal levels are logged as errors; the embedding process decides
// whether to exit.
func (s slogLogger) DPanic(msg string, tags ...tag.Tag) { s.emit(slog.LevelError, msg, tags) }
func (s slogLogger) Panic(msg string, tags ...tag.Tag)  { s.emit(slog.LevelError, msg, tags) }
func (s slogLogger) Fatal(msg string, tags ...tag.Tag)  { s.emit(slog.LevelError, msg, tags) }

func (s slogLogger) SLog() *slog.Logger { return s.log }

func (s slogLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	if level < s.level.Level() || !s.log.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]slog.Attr, len(tags))
	for i, t := range tags {
		attrs[i] = slog.Any(t.Key(), t.Value())
	}
	s.log.LogAttrs(context.Background(), level, msg, attrs...)
}
