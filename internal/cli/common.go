package cli

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/rabbitmq"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// ConnectTimeout bounds the first connection of a command.
const ConnectTimeout = 15 * time.Second

// AddBrokerFlags gives a command that connects to a broker --url and the
// TLS flags. urlDefault says what --url defaults to. The default is
// resolved when the command runs, so --help never prints a password that
// $ACEMQ_URL carries.
func AddBrokerFlags(cmd *cobra.Command, urlDefault string) {
	fl := cmd.Flags()
	fl.String("url", "", "broker URL: amqp://user:pass@host:5672/vhost, amqps://…, or memory://NAME, a broker inside this one process (default "+urlDefault+")")
	fl.String("tls-ca", "", "PEM file of certificate authorities to verify an amqps:// broker with, in addition to the system's")
	fl.String("tls-cert", "", "PEM client certificate for an amqps:// broker that asks for one (with --tls-key)")
	fl.String("tls-key", "", "PEM key of --tls-cert")
	fl.Bool("tls-allow-development", false, "accept a broker presenting a development certificate (from acemq certs); never in production")
}

// AddWaitFlag gives a command that connects through openSession
// --wait-for-broker.
func AddWaitFlag(cmd *cobra.Command) {
	cmd.Flags().Duration("wait-for-broker", 0, "keep trying to connect, with backoff, for up to this long when the broker is not there yet (0: one attempt, bounded by 15s); a refused login or certificate ends it at once")
}

// SharedURLDefault is what --url defaults to on the commands that need a
// broker other commands can see.
const SharedURLDefault = "$ACEMQ_URL, else " + DefaultAMQPURL

// BrokerURL is the --url flag's value, else $ACEMQ_URL, else the local
// RabbitMQ; builtin reports that last case, the URL nobody chose.
func BrokerURL(cmd *cobra.Command) (url string, builtin bool) {
	if u, _ := cmd.Flags().GetString("url"); u != "" {
		return u, false
	}
	if u := os.Getenv("ACEMQ_URL"); u != "" {
		return u, false
	}
	return DefaultAMQPURL, true
}

// IsMemory reports whether url names an in-process memory:// broker.
func IsMemory(url string) bool {
	scheme, _, ok := strings.Cut(url, "://")
	return ok && strings.EqualFold(scheme, "memory")
}

// MemoryNote says, for a command that needs a broker other commands can
// see, what a memory:// URL gives it instead.
func MemoryNote(url string) string {
	return fmt.Sprintf("%s is this process's own in-memory broker, empty when the command starts: another acemq command cannot see what it holds; set --url or ACEMQ_URL to a broker they share, such as RabbitMQ", driver.RedactURL(url))
}

// MemoryHint is memoryNote in parentheses, to end an error with, for a
// memory:// URL; "" for any other.
func MemoryHint(url string) string {
	if !IsMemory(url) {
		return ""
	}
	return " (" + MemoryNote(url) + ")"
}

// Session is what a command that talks to a broker opens first: its
// connection, named after the command, and the --metrics-addr endpoints
// when asked for.
type Session struct {
	Cmd  *cobra.Command
	URL  string // as given, password included
	Conn *acemq.Conn
	mx   *metrics
}

// OpenSession is the preamble of every command that connects: it resolves
// the broker URL, opens the --metrics-addr listener when metricsAddr is
// set (so that a taken port fails the command before it connects),
// connects with the TLS flags and opts, and starts serving the metrics.
// Close it when done.
func OpenSession(cmd *cobra.Command, metricsAddr string, opts ...acemq.ConnOption) (*Session, error) {
	url, builtin := BrokerURL(cmd)
	mx, err := newMetrics(cmd, metricsAddr)
	if err != nil {
		return nil, err
	}
	conn, err := connect(cmd, url, builtin, append(mx.connectOptions(), opts...)...)
	if err != nil {
		mx.close()
		return nil, err
	}
	mx.start(cmd, conn)
	return &Session{Cmd: cmd, URL: url, Conn: conn, mx: mx}, nil
}

// Close closes the connection within a bounded time, then the metrics.
func (s *Session) Close() {
	closeConn(s.Cmd, s.Conn)
	s.mx.close()
}

// Hint is memoryHint for the session's broker.
func (s *Session) Hint() string { return MemoryHint(s.URL) }

// RequireQueue checks that queue exists; a missing queue fails the command
// (exit 1) saying so, followed by advice (for example how to create it)
// and, on memory://, why it is not there.
func (s *Session) RequireQueue(ctx context.Context, queue, advice string) (queues.Info, error) {
	info, err := queues.Inspect(ctx, s.Conn, queue)
	if errors.Is(err, acemq.ErrNotFound) {
		return info, WithCode(ExitFailure, fmt.Errorf("queue %q does not exist%s%s", queue, advice, s.Hint()))
	}
	if err != nil {
		return info, WithCode(ExitFailure, err)
	}
	return info, nil
}

// connect opens a connection to url, named after the command so that the
// broker's management UI says who is connected. builtin says url is the
// built-in default, which nobody chose.
//
// With --wait-for-broker D (the commands that have it), the connection is
// tried again, with backoff, for up to D in all, each failed attempt
// reported on standard error; without it, one attempt within
// connectTimeout.
func connect(cmd *cobra.Command, url string, builtin bool, opts ...acemq.ConnOption) (*acemq.Conn, error) {
	bound := ConnectTimeout
	var waitOpts []acemq.ConnOption
	if fl := cmd.Flags().Lookup("wait-for-broker"); fl != nil {
		wait, _ := cmd.Flags().GetDuration("wait-for-broker")
		if wait < 0 {
			return nil, WithCode(ExitFailure, fmt.Errorf("--wait-for-broker must not be negative, not %s", wait))
		}
		if wait > 0 {
			bound = wait
			errOut := cmd.ErrOrStderr()
			waitOpts = []acemq.ConnOption{acemq.WithWaitForBroker(), acemq.WithOnConnEvent(func(e driver.Event) {
				if e.Kind == driver.EventRetrying {
					fmt.Fprintf(errOut, "acemq: waiting for the broker (attempt %d failed, next in %s): %s\n", e.Attempt, e.Delay.Round(100*time.Millisecond), driver.Redact(e.Err))
				}
			})}
		}
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), bound)
	defer cancel()
	tlsOpts, err := TLSOptions(cmd)
	if err != nil {
		return nil, err
	}
	opts = append(append(append([]acemq.ConnOption{acemq.WithName("acemq " + cmd.Name())}, tlsOpts...), waitOpts...), opts...)
	conn, err := acemq.Connect(ctx, url, opts...)
	if err != nil {
		return nil, ConnectError(url, builtin, err)
	}
	return conn, nil
}

// ConnectError explains a failed connection. The library's error already
// names the (redacted) URL. A failure at the built-in default URL is most
// often a machine without a broker, so it says how to name one.
func ConnectError(url string, builtin bool, err error) error {
	if errors.Is(err, rabbitmq.ErrDevelopmentCertificate) {
		return WithCode(ExitFailure, fmt.Errorf("%w (to accept it from this command, add --tls-allow-development; never in production)", err))
	}
	if builtin {
		what := "no broker answered at the default URL"
		var dial *net.OpError
		if !errors.As(err, &dial) { // something answered, and refused
			what = "could not connect to the default URL"
		}
		return WithCode(ExitFailure, fmt.Errorf("%s %s: set --url or ACEMQ_URL to your broker's URL, e.g. amqp://user:pass@host:5672/vhost (memory://NAME is a broker inside this one command, which suits only demo and acemq-bench) (%w)", what, driver.RedactURL(url), err))
	}
	if !strings.Contains(err.Error(), driver.RedactURL(url)) {
		return WithCode(ExitFailure, fmt.Errorf("could not connect to %s: %w", driver.RedactURL(url), err))
	}
	return WithCode(ExitFailure, err)
}

// tlsFlags are the TLS flags of a command that connects.
type tlsFlags struct {
	ca, cert, key string
	allowDev      bool
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

// TLSConfig builds the TLS configuration the TLS flags describe, or nil when
// none is given (the library then verifies with the system roots).
func TLSConfig(cmd *cobra.Command) (*tls.Config, error) {
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
			return nil, WithCode(ExitFailure, fmt.Errorf("--tls-ca: %w", err))
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, WithCode(ExitFailure, fmt.Errorf("--tls-ca %s holds no PEM certificate", f.ca))
		}
		cfg.RootCAs = pool
	}
	if (f.cert == "") != (f.key == "") {
		return nil, WithCode(ExitFailure, errors.New("--tls-cert and --tls-key go together"))
	}
	if f.cert != "" {
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, WithCode(ExitFailure, fmt.Errorf("--tls-cert/--tls-key: %w", err))
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// TLSOptions are the Connect options the TLS flags describe.
func TLSOptions(cmd *cobra.Command) ([]acemq.ConnOption, error) {
	cfg, err := TLSConfig(cmd)
	if err != nil || cfg == nil {
		return nil, err
	}
	if readTLSFlags(cmd).allowDev {
		cfg = rabbitmq.AllowDevelopmentCertificates(cfg)
	}
	return []acemq.ConnOption{acemq.WithTLS(cfg)}, nil
}

// Within is parent bounded by d, or not bounded when d is 0 (the
// commands' --timeout 0: no limit; Ctrl-C stops).
func Within(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(parent, d)
	}
	return context.WithCancel(parent)
}

// closeTimeout bounds closing a consumer, responder or requester a command
// started.
const closeTimeout = 10 * time.Second

// CloseQuietly closes what close closes within closeTimeout, ignoring a
// failure: it runs on the way out, after the command's own result.
func CloseQuietly(close func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = close(ctx)
}

// closeConn closes conn within a bounded time, reporting a failure on stderr.
func closeConn(cmd *cobra.Command, conn *acemq.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Close(ctx); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "acemq: closing the connection: %v\n", err)
	}
}

// ReadBody returns the message body: the single argument, or standard input
// when the argument is "-" or absent.
func ReadBody(cmd *cobra.Command, args []string) ([]byte, error) {
	if len(args) > 1 {
		return nil, WithCode(ExitFailure, fmt.Errorf("expected at most one BODY argument, got %d (quote the body, or use - to read standard input)", len(args)))
	}
	if len(args) == 1 && args[0] != "-" {
		return []byte(args[0]), nil
	}
	if f, ok := cmd.InOrStdin().(*os.File); ok && len(args) == 0 && term.IsTerminal(int(f.Fd())) {
		return nil, WithCode(ExitFailure, errors.New("no BODY given: pass it as an argument, or pipe it in (use - to read standard input)"))
	}
	b, err := io.ReadAll(cmd.InOrStdin())
	if err != nil {
		return nil, fmt.Errorf("reading the body from standard input: %w", err)
	}
	return b, nil
}

// ParseHeaders turns k=v flags into application headers (string values).
func ParseHeaders(kvs []string) (map[string]any, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	h := make(map[string]any, len(kvs))
	var reserved []string
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, WithCode(ExitFailure, fmt.Errorf("--header %q: expected name=value", kv))
		}
		if wire.IsReserved(k) {
			reserved = append(reserved, k)
			continue
		}
		h[k] = v
	}
	if len(reserved) > 0 {
		return nil, WithCode(ExitFailure, fmt.Errorf("these header names belong to AceMQ and cannot be set by hand: %s", strings.Join(reserved, ", ")))
	}
	return h, nil
}

// StderrIsTerminal reports whether progress bars should be drawn.
func StderrIsTerminal(cmd *cobra.Command) bool {
	f, ok := cmd.ErrOrStderr().(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Suffix is a short random string for unique queue and exchange names.
func Suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
