package provider

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGuardJSONLinesDropsMalformedAndOversizedLines(t *testing.T) {
	t.Parallel()
	huge := `{"jsonrpc":"2.0","method":"x","params":"` + strings.Repeat("x", 20<<20) + `"}`
	in := strings.Join([]string{`{"a":1}`, `{not json`, huge, ``, `{"b":2}`, `{"tail":3}`}, "\n")
	var logs bytes.Buffer
	out, err := io.ReadAll(GuardJSONLines(strings.NewReader(in), MaxProtocolLine, slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	assert.Equal(t, "{\"a\":1}\n{\"b\":2}\n{\"tail\":3}\n", string(out), "a final line without newline is delivered too")
	assert.Contains(t, logs.String(), "not JSON")
	assert.Contains(t, logs.String(), "too long")
	assert.Less(t, logs.Len(), 4096, "the dropped line is not logged whole")
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	t.Parallel()
	tb := NewTailBuffer(5)
	_, _ = tb.Write([]byte("hello "))
	_, _ = tb.Write([]byte("world"))
	assert.Equal(t, "world", tb.String())
}
