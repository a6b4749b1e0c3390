// Command jam runs Jam (`jam dev`, `jam server`, `jam worker`, `jam migrate`) and is the
// REST client for operators and scripts (`jam <noun> <verb>`).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/jam-dev/jam/api/client"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		// The first signal starts an orderly shutdown; a second one kills the process.
		stop()
	}()
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		var apiErr *client.Error
		if errors.As(err, &apiErr) {
			fmt.Fprintln(os.Stderr, "jam:", apiErr.Error())
		} else {
			fmt.Fprintln(os.Stderr, "jam:", err)
		}
		var exit *exitError
		if errors.As(err, &exit) {
			os.Exit(exit.code)
		}
		os.Exit(1)
	}
}
