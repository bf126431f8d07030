package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/rabbitmq"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// connectTimeout bounds the first connection of a command.
const connectTimeout = 15 * time.Second

// brokerURL is the --url flag's value, else $ACEMQ_URL, else the local
// RabbitMQ.
func brokerURL(cmd *cobra.Command) string {
	if u, _ := cmd.Flags().GetString("url"); u != "" {
		return u
	}
	return defaultURL()
}

// connect opens a connection to --url, named after the command so that the
// broker's management UI says who is connected.
func connect(cmd *cobra.Command, opts ...acemq.Option) (*acemq.Conn, error) {
	url := brokerURL(cmd)
	ctx, cancel := context.WithTimeout(cmd.Context(), connectTimeout)
	defer cancel()
	tlsOpts, err := tlsOptions(cmd)
	if err != nil {
		return nil, err
	}
	opts = append(append([]acemq.Option{acemq.WithName("acemq " + cmd.Name())}, tlsOpts...), opts...)
	conn, err := acemq.Connect(ctx, url, opts...)
	if err != nil {
		return nil, connectError(url, err)
	}
	return conn, nil
}

// connectError explains a failed connection. The library's error already
// names the (redacted) URL.
func connectError(url string, err error) error {
	if errors.Is(err, rabbitmq.ErrDevelopmentCertificate) {
		return withCode(exitFailure, fmt.Errorf("%w (to accept it from this command, add --tls-allow-development; never in production)", err))
	}
	if !strings.Contains(err.Error(), driver.RedactURL(url)) {
		return withCode(exitFailure, fmt.Errorf("could not connect to %s: %w", driver.RedactURL(url), err))
	}
	return withCode(exitFailure, err)
}

// tlsFlags are the global TLS flags.
type tlsFlags struct {
	ca, cert, key string
	allowDev      bool
}

// addTLSFlags adds the TLS flags every command takes.
func addTLSFlags(fl *pflag.FlagSet) {
	fl.String("tls-ca", "", "PEM file of certificate authorities to verify an amqps:// broker with, in addition to the system's")
	fl.String("tls-cert", "", "PEM client certificate for an amqps:// broker that asks for one (with --tls-key)")
	fl.String("tls-key", "", "PEM key of --tls-cert")
	fl.Bool("tls-allow-development", false, "accept a broker presenting a development certificate (from acemq certs); never in production")
}

func readTLSFlags(cmd *cobra.Command) tlsFlags {
	fl := cmd.Flags()
	var f tlsFlags
	f.ca, _ = fl.GetString("tls-ca")
	f.cert, _ = fl.GetString("tls-cert")
	f.key, _ = fl.GetString("tls-key")
	f.allowDev, _ = fl.GetBool("tls-allow-development")
	return f
}

// tlsConfig builds the TLS configuration the TLS flags describe, or nil when
// none is given (the library then verifies with the system roots).
func tlsConfig(cmd *cobra.Command) (*tls.Config, error) {
	f := readTLSFlags(cmd)
	if f == (tlsFlags{}) {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.ca != "" {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, withCode(exitFailure, fmt.Errorf("--tls-ca: %w", err))
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, withCode(exitFailure, fmt.Errorf("--tls-ca %s holds no PEM certificate", f.ca))
		}
		cfg.RootCAs = pool
	}
	if (f.cert == "") != (f.key == "") {
		return nil, withCode(exitFailure, errors.New("--tls-cert and --tls-key go together"))
	}
	if f.cert != "" {
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, withCode(exitFailure, fmt.Errorf("--tls-cert/--tls-key: %w", err))
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// tlsOptions are the Connect options the TLS flags describe.
func tlsOptions(cmd *cobra.Command) ([]acemq.Option, error) {
	cfg, err := tlsConfig(cmd)
	if err != nil || cfg == nil {
		return nil, err
	}
	if readTLSFlags(cmd).allowDev {
		cfg = rabbitmq.AllowDevelopmentCertificates(cfg)
	}
	return []acemq.Option{acemq.WithTLS(cfg)}, nil
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
