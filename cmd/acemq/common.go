package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// connectTimeout bounds the first connection of a command.
const connectTimeout = 15 * time.Second

// brokerURL is the --url flag's value.
func brokerURL(cmd *cobra.Command) string {
	u, _ := cmd.Flags().GetString("url")
	return u
}

// connect opens a connection to --url, named after the command so that the
// broker's management UI says who is connected.
func connect(cmd *cobra.Command, opts ...acemq.Option) (*acemq.Conn, error) {
	url := brokerURL(cmd)
	ctx, cancel := context.WithTimeout(cmd.Context(), connectTimeout)
	defer cancel()
	opts = append([]acemq.Option{acemq.WithName("acemq " + cmd.Name())}, opts...)
	conn, err := acemq.Connect(ctx, url, opts...)
	if err != nil {
		return nil, fmt.Errorf("could not connect to %s: %w", driver.RedactURL(url), err)
	}
	return conn, nil
}

// closeConn closes conn within a bounded time, reporting a failure on stderr.
func closeConn(cmd *cobra.Command, conn *acemq.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Close(ctx); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "acemq: closing the connection: %v\n", err)
	}
}

// readBody returns the message body: the single argument, or standard input
// when the argument is "-" or absent.
func readBody(cmd *cobra.Command, args []string) ([]byte, error) {
	if len(args) > 1 {
		return nil, withCode(exitFailure, fmt.Errorf("expected at most one BODY argument, got %d (quote the body, or use - to read standard input)", len(args)))
	}
	if len(args) == 1 && args[0] != "-" {
		return []byte(args[0]), nil
	}
	if f, ok := cmd.InOrStdin().(*os.File); ok && len(args) == 0 && term.IsTerminal(int(f.Fd())) {
		return nil, withCode(exitFailure, errors.New("no BODY given: pass it as an argument, or pipe it in (use - to read standard input)"))
	}
	b, err := io.ReadAll(cmd.InOrStdin())
	if err != nil {
		return nil, fmt.Errorf("reading the body from standard input: %w", err)
	}
	return b, nil
}

// parseHeaders turns k=v flags into application headers (string values).
func parseHeaders(kvs []string) (map[string]any, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	h := make(map[string]any, len(kvs))
	var reserved []string
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, withCode(exitFailure, fmt.Errorf("--header %q: expected name=value", kv))
		}
		if acemq.IsReserved(k) {
			reserved = append(reserved, k)
			continue
		}
		h[k] = v
	}
	if len(reserved) > 0 {
		return nil, withCode(exitFailure, fmt.Errorf("these header names belong to AceMQ and cannot be set by hand: %s", strings.Join(reserved, ", ")))
	}
	return h, nil
}

// stderrIsTerminal reports whether progress bars should be drawn.
func stderrIsTerminal(cmd *cobra.Command) bool {
	f, ok := cmd.ErrOrStderr().(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// suffix is a short random string for unique queue and exchange names.
func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
