// Package console is the console command: it serves the operator console
// (package console of the module) on a broker. The demo serves it too,
// through Serve.
package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec/encrypted"
	"github.com/acemq/acemq/console"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/cli"
	"github.com/spf13/cobra"
)

// DefaultListen is where the console listens unless told.
const DefaultListen = "127.0.0.1:8484"

// Options are console's flags, read by NewCmd's command; the demo fills
// them in to serve the console on its broker.
type Options struct {
	cli.Invocation

	Listen     string
	Token      string
	Queues     []string
	Management string
	PeekLimit  int
	PeekBudget string // a size: 8MiB; empty means console.DefaultPeekBudget
	Keyring    string
}

// long is the command's help.
const long = `console serves the operator console on --listen: a web page listing the
broker's queues with their depth, consumers and rates, each with its
dead-letter half (Q.dlq, Q.parked) and retry rungs; a queue's messages,
peeked (never taken) and grouped by reason with counts and first and last
failure; each message's envelope, headers and body; and the actions replay
(to where the messages came from, each confirmed before the dead letter is
removed), delete (after a confirmation) and export as JSON lines.

The queues come from RabbitMQ's management API (--management; by default
http://HOST:15672/ with --url's user and password, used if it answers) and
otherwise from --queues. On memory:// only --queues can name them.

It listens on loopback by default. Any other --listen address needs a token,
which every request must carry: give --token, or one is made up and printed
with the address to open.

Looking at a queue puts every message back, marked redelivered; on a quorum
queue that counts towards its delivery limit (see docs/console.md).

With --keyring FILE, encrypted bodies are shown decrypted; without it the
page says which key id would open them.`

// NewCmd is the console command. When runF is not nil it runs instead of
// the command's own run, once the flags are read and valid.
func NewCmd(runF func(*Options) error) *cobra.Command {
	f := &Options{}
	cmd := &cobra.Command{
		Use:   "console [--listen 127.0.0.1:8484] [--queues Q,…] [--management URL|off] [--token T] [--keyring FILE]",
		Short: "Serve a web page to see every queue's dead letters, grouped by reason, and replay them",
		Long:  long,
		Example: `  acemq console --url amqp://guest:guest@localhost:5672/
  acemq console --url amqp://ops:secret@rabbit:5672/prod --listen 0.0.0.0:8484 --token "$TOKEN"
  acemq console --url amqp://… --management off --queues orders.new,payments.in`,
		Args: cobra.NoArgs,
		RunE: cli.RunE(f, runF),
	}
	f.addFlags(cmd)
	return cmd
}

// Validate checks the flags before anything connects.
func (f *Options) Validate() error {
	if f.PeekLimit < 1 {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--peek-limit must be 1 or more, not %d", f.PeekLimit))
	}
	if _, err := parseSize(f.PeekBudget); err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--peek-budget %q: %v", f.PeekBudget, err))
	}
	return nil
}

// Run connects and serves the console until SIGINT or SIGTERM.
func (f *Options) Run() error {
	cmd := f.Cmd
	url, _ := cli.BrokerURL(cmd)
	if cli.IsMemory(url) {
		fmt.Fprintf(cmd.ErrOrStderr(), "acemq: %s\n", cli.MemoryNote(url))
	} else if f.Management == "" {
		f.Management = "auto"
	}
	s, err := cli.OpenSession(cmd, "")
	if err != nil {
		return err
	}
	defer s.Close()
	return Serve(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), s.Conn, url, *f, nil)
}

// addFlags defines console's flags on cmd.
func (f *Options) addFlags(cmd *cobra.Command) {
	cli.AddBrokerFlags(cmd, cli.SharedURLDefault)
	cli.AddWaitFlag(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.Listen, "listen", DefaultListen, "address to serve the console on; off loopback it needs a token")
	fl.StringVar(&f.Token, "token", "", "the token every request must carry (made up when --listen is off loopback and none is given)")
	fl.StringSliceVar(&f.Queues, "queues", nil, "the application's queues to list (with their .dlq and .parked), when the management API is not used")
	fl.StringVar(&f.Management, "management", "", "RabbitMQ's management API: http://[user:pass@]host:15672/, or off (default: try http://HOST:15672/ with --url's credentials)")
	fl.IntVar(&f.PeekLimit, "peek-limit", console.DefaultPeekLimit, "read at most this many messages of a queue to show it")
	fl.StringVar(&f.PeekBudget, "peek-budget", "8MiB", "keep at most this much of the summaries of a queue's messages to show it (bytes, or with KiB, MiB or GiB)")
	cli.AddKeyringFlag(cmd, &f.Keyring)
}

// Serve serves the console on conn until ctx ends. brokerURL is the
// URL conn was opened with (password included, for the management API's
// default credentials; never printed). extra adds options (the demo's
// topology); ready, when set, is told the address served.
func Serve(ctx context.Context, out, errOut io.Writer, conn *acemq.Conn, brokerURL string, f Options, ready func(addr string), extra ...console.Option) error {
	opts, token, err := f.consoleOptions(ctx, errOut, brokerURL)
	if err != nil {
		return err
	}
	opts = append(opts, extra...)
	con, err := console.New(conn, opts...)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	defer con.Close()
	ln, err := net.Listen("tcp", f.Listen)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--listen %s: %w", f.Listen, err))
	}
	addr := ln.Addr().String()
	link := "http://" + addr + "/"
	if token != "" {
		link += "?token=" + url.QueryEscape(token)
	}
	fmt.Fprintf(out, "acemq console on %s for %s (Ctrl-C stops)\n", link, conn.URL())
	if ready != nil {
		ready(addr)
	}
	srv := &http.Server{Handler: con, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("serving the console: %w", err))
	case <-ctx.Done():
	}
	_ = con.Close() // ends the live streams, which Shutdown would wait for
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	<-done
	return nil
}

// consoleOptions are the console's options the flags ask for, and the
// token every request must carry ("" on loopback without --token).
func (f *Options) consoleOptions(ctx context.Context, errOut io.Writer, brokerURL string) ([]console.Option, string, error) {
	keys, err := cli.LoadKeyring(f.Keyring)
	if err != nil {
		return nil, "", err
	}
	opts := []console.Option{console.WithQueues(f.Queues...), console.WithPeekLimit(f.PeekLimit), console.WithBodyDecoder(decryptBody(keys))}
	if f.PeekBudget != "" {
		budget, err := parseSize(f.PeekBudget)
		if err != nil {
			return nil, "", cli.WithCode(cli.ExitFailure, fmt.Errorf("--peek-budget %q: %v", f.PeekBudget, err))
		}
		opts = append(opts, console.WithPeekBudget(budget))
	}
	switch f.Management {
	case "", "off":
	case "auto":
		mu, vhost, ok := cli.ManagementURL(brokerURL)
		if ok && managementAnswers(ctx, mu) {
			opts = append(opts, console.WithManagement(mu, vhost))
		} else {
			fmt.Fprintf(errOut, "acemq: the management API did not answer at %s; listing only --queues (enable it with: rabbitmq-plugins enable rabbitmq_management)\n", redacted(mu))
		}
	default:
		_, vhost, _ := cli.ManagementURL(brokerURL)
		opts = append(opts, console.WithManagement(f.Management, vhost))
	}
	token := f.Token
	if token == "" && !console.IsLoopback(f.Listen) {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, "", err
		}
		token = hex.EncodeToString(b[:])
	}
	if token != "" {
		opts = append(opts, console.WithToken(token))
	}
	return opts, token, nil
}

// decryptBody is the console's body decoder: an encrypted body
// (application/vnd.acemq.encrypted) is opened with keys, the --keyring, and
// shown as JSON when its plaintext is JSON (the frame does not say what the
// plaintext's content type was); without a keyring the page says which key
// would open it. Other bodies are left as they are.
func decryptBody(keys *encrypted.Codec) console.BodyDecoder {
	return func(m acemq.Message[[]byte]) ([]byte, string, bool, error) {
		if !cli.IsEncrypted(m.ContentType) {
			return nil, "", false, nil
		}
		if keys == nil {
			id, ok := encrypted.KeyIDOf(m.Body)
			if !ok {
				return nil, "", false, errors.New("labelled encrypted, but the body is not an encrypted frame")
			}
			return nil, "", false, fmt.Errorf("encrypted under key id %s: start the console with --keyring FILE to read it", id)
		}
		plain, err := keys.Open(m.Body)
		if err != nil {
			return nil, "", false, err
		}
		ct := ""
		if json.Valid(plain) {
			ct = "application/json"
		}
		return plain, ct, true, nil
	}
}

// managementAnswers reports whether the management API answers at mgmt.
func managementAnswers(ctx context.Context, mgmt string) bool {
	u, err := driver.ParseURL(mgmt)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(u.Scheme+"://"+u.Host+u.Path, "/")+"/api/overview", nil)
	if err != nil {
		return false
	}
	if u.User != nil {
		p, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), p)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// redacted is a URL without its password.
func redacted(raw string) string { return driver.RedactURL(raw) }

// parseSize reads a size in bytes, written as a number with an optional
// KiB, MiB or GiB (or B) suffix: 65536, 64KiB, 8MiB. Empty is the console's
// default peek budget.
func parseSize(s string) (int, error) {
	if s == "" {
		return console.DefaultPeekBudget, nil
	}
	num, unit := s, 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, unit = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || n > math.MaxInt/unit {
		return 0, errors.New("write a size in bytes, or with KiB, MiB or GiB: 65536, 64KiB, 8MiB")
	}
	return n * unit, nil
}
