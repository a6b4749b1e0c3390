package repo

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestOutputIsCappedAndErrorTextBoundedAndClean(t *testing.T) {
	c := &Capped{N: 4}
	if n, err := c.Write([]byte("abcdef")); n != 6 || err != nil || string(c.Bytes()) != "abcd" {
		t.Fatalf("capped write: %d %v %q", n, err, c.Bytes())
	}
	got := ErrorText([]byte("  fatal:\x1b[31m bad\x00 ref\n" + strings.Repeat("x", 2*MaxErrorText)))
	if strings.ContainsAny(got, "\x1b\x00") || len(got) > MaxErrorText+len("…") || !strings.HasPrefix(got, "fatal:[31m bad ref") {
		t.Fatalf("error text %q", got[:40])
	}
}

func TestGhOutputIsReadPastNotices(t *testing.T) {
	if got := lastURL([]byte("Creating pull request for x into main\n\nhttps://github.com/o/r/pull/7\n")); got != "https://github.com/o/r/pull/7" {
		t.Fatalf("url %q", got)
	}
	if got := lastURL([]byte("no url here\n")); got != "" {
		t.Fatalf("url %q", got)
	}
	if got := string(lastJSON([]byte("A new release of gh is available\n[{\"name\":\"build\"}]\n"))); got != `[{"name":"build"}]` {
		t.Fatalf("json %q", got)
	}
}

func TestExecKillsACallThatOutlivesItsBound(t *testing.T) {
	start := time.Now()
	_, err := Exec(context.Background(), []string{"/bin/sleep", "5"}, "", nil, nil, 100*time.Millisecond)
	if !errors.Is(err, ErrTimeout) || time.Since(start) > 3*time.Second {
		t.Fatalf("err %v after %s", err, time.Since(start))
	}
	_, err = Exec(context.Background(), []string{"/bin/sh", "-c", "echo nope >&2; exit 3"}, "", nil, nil, time.Second)
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != 3 || exit.Stderr != "nope" {
		t.Fatalf("exit %+v %v", exit, err)
	}
}
