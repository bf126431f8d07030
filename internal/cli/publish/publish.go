// Package publish is the publish command: one message or --count copies,
// confirmed and mandatory, or scheduled with --delay or --at.
package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/codec/encrypted"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/cli"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// SeqHeader numbers the copies of publish --count.
const SeqHeader = "acemq-cli-seq"

// publishBatch is how many copies publish --count sends before awaiting
// their confirms.
const publishBatch = 200

// publishLostRetries bounds how often a copy whose connection died before
// its confirm is sent again.
const publishLostRetries = 5

// Options are publish's flags and arguments, read by NewCmd's command.
type Options struct {
	cli.Invocation
	headerValue map[string]any // --header, parsed

	exchange, routingKey, typ      string
	headers                        []string
	correlationID, causationID, ct string
	count                          int
	timeout                        time.Duration
	transient                      bool
	later                          laterFlags
	codec, keyring                 string
	encrypt                        bool
}

// long is the command's help.
const long = `publish sends one message (or --count copies) with an AceMQ envelope,
persistent, mandatory and confirmed by the broker, and prints the message id
of each on standard output.

The body is the BODY argument, or standard input when BODY is - or absent.
Without --content-type it is sent as application/json when it parses as JSON,
text/plain; charset=utf-8 when it is UTF-8 text, application/octet-stream
otherwise.

--codec NAME writes the body in a named format (json, text, bytes, xml,
yaml, toml; 'acemq publish --help' lists them): text and bytes send the
body as given; the others read it as JSON and encode the value, so
--codec yaml '{"id":"o-1"}' sends id: o-1 as application/yaml.

--encrypt --keyring FILE encrypts the body (after --codec) with the
keyring's current key (docs/wire.md §4.2) and sends it as
application/vnd.acemq.encrypted; the reader needs a keyring holding that key
and a codec for the format inside.

With --count N it sends N copies, each with its own id and a header
acemq-cli-seq numbering it from 1, and reports on standard error how many the
broker confirmed. A copy whose connection died before its confirm is sent
again with the same id once the connection has recovered (so a consumer may
see it twice); publishing waits for recovery until --timeout or Ctrl-C.

With --ttl the message expires if it is still on a queue that long after it
got there (the broker dead-letters it, reason expired, when the queue has a
dead-letter exchange); with --priority a priority queue delivers it ahead of
lower ones.

With --delay or --at the message is scheduled instead: it waits on the
broker's acemq.schedule rungs and is delivered to the exchange and routing
key when it falls due, by a running 'acemq serve --scheduler' (or any
language's scheduler on the broker). The printed id is the delivered
message's. A time less than a second away, or past, is delivered at once.

Exit codes: 0 every message confirmed; 4 unroutable (no queue is bound for
the routing key; nothing more is sent); 3 --timeout passed; 1 anything else.`

// NewCmd is the publish command. When runF is not nil it runs instead of
// the command's own run, once the flags are read and valid.
func NewCmd(runF func(*Options) error) *cobra.Command {
	f := &Options{}
	cmd := &cobra.Command{
		Use:   "publish --exchange E --routing-key K [flags] [BODY | -]",
		Short: "Publish a message, confirmed and mandatory; print its id",
		Long:  long,
		Example: `  acemq publish --exchange orders --routing-key order.placed '{"id":"o-1"}'
  echo '{"id":"o-2"}' | acemq publish --exchange "" --routing-key orders.new --header x-tenant=acme -
  acemq publish --exchange orders --routing-key order.placed --count 10000 '{"load":"test"}'
  acemq publish --exchange billing --routing-key invoice.due --delay 90s '{"invoice":"i-7"}'
  acemq publish --exchange billing --routing-key invoice.due --at 2026-12-01T09:00:00Z '{"invoice":"i-8"}'
  acemq publish --exchange "" --routing-key jobs --priority 9 --ttl 30s '{"job":"urgent"}'`,
		Args: cobra.MaximumNArgs(1),
		RunE: cli.RunE(f, runF),
	}
	f.addFlags(cmd)
	return cmd
}

// addFlags defines publish's flags on cmd.
func (f *Options) addFlags(cmd *cobra.Command) {
	cli.AddBrokerFlags(cmd, cli.SharedURLDefault)
	cli.AddWaitFlag(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.exchange, "exchange", "", `exchange to publish to ("" is the default exchange, which routes by queue name)`)
	fl.StringVar(&f.routingKey, "routing-key", "", "routing key")
	fl.StringVar(&f.typ, "type", "", "envelope type (default: the routing key)")
	fl.StringArrayVar(&f.headers, "header", nil, "application header name=value (repeatable; x-acemq-* names are refused)")
	fl.StringVar(&f.correlationID, "correlation-id", "", "envelope correlation id (default: the message id)")
	fl.StringVar(&f.causationID, "causation-id", "", "envelope causation id: the id of the message that caused this one")
	fl.StringVar(&f.ct, "content-type", "", "content type (default: guessed from the body)")
	fl.IntVar(&f.count, "count", 1, "number of copies to send")
	fl.DurationVar(&f.timeout, "timeout", 0, "give up after this long (0: no limit; Ctrl-C stops)")
	fl.BoolVar(&f.transient, "transient", false, "delivery mode 1: the broker may lose the message on restart")
	f.later.add(fl)
	fl.StringVar(&f.codec, "codec", "", "write the body in this format: "+strings.Join(codec.Names(), ", ")+" (all but text and bytes read the body as JSON)")
	cli.AddKeyringFlag(cmd, &f.keyring)
	fl.BoolVar(&f.encrypt, "encrypt", false, "encrypt the body with the current key of --keyring")
	_ = cmd.MarkFlagRequired("exchange")
	_ = cmd.MarkFlagRequired("routing-key")
}

// Validate checks the flags before anything is read or connected.
func (f *Options) Validate() error {
	if f.count < 1 {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--count must be at least 1, not %d", f.count))
	}
	if f.exchange == "" && f.routingKey == "" {
		return cli.WithCode(cli.ExitFailure, errors.New("--routing-key is empty: on the default exchange it must name a queue"))
	}
	headers, err := cli.ParseHeaders(f.headers)
	if err != nil {
		return err
	}
	f.headerValue = headers
	return f.later.check(*f)
}

// Run reads the body and publishes it, or schedules it.
func (f *Options) Run() error {
	cmd := f.Cmd
	body, err := cli.ReadBody(cmd, f.Args)
	if err != nil {
		return err
	}
	body, err = f.prepare(body)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	if f.later.scheduled() {
		return runSchedule(cmd, *f, f.headerValue, body)
	}
	ctx, cancel := cli.Within(cmd.Context(), f.timeout)
	defer cancel()
	s, err := cli.OpenSession(cmd, "")
	if err != nil {
		return err
	}
	defer s.Close()

	opts := []acemq.PublisherOption{acemq.WithCodec(cli.RawCodec{Type: f.ct})}
	if f.transient {
		opts = append(opts, acemq.WithPersistent(false))
	}
	pub := acemq.NewPublisher[[]byte](s.Conn, f.exchange, opts...)
	if f.count == 1 {
		return f.sendOne(ctx, s, pub, body)
	}
	return f.sendCopies(ctx, s, pub, body)
}

// envelope is the envelope of copy seq (numbered with SeqHeader when
// --count sends more than one).
func (f *Options) envelope(seq int) (acemq.Envelope, error) {
	h := f.headerValue
	if f.count > 1 {
		h = make(map[string]any, len(f.headerValue)+1)
		for k, v := range f.headerValue {
			h[k] = v
		}
		h[SeqHeader] = int64(seq)
	}
	return acemq.NewEnvelope(acemq.Fields{Type: f.typ, CorrelationID: f.correlationID, CausationID: f.causationID, Headers: h})
}

// sendOne publishes one message, again with the same id while its
// connection dies before the confirm, and prints its id.
func (f *Options) sendOne(ctx context.Context, s *cli.Session, pub *acemq.Publisher[[]byte], body []byte) error {
	env, err := f.envelope(1)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	sendOpts := append([]acemq.SendOption{acemq.WithEnvelope(env)}, f.later.sendOptions()...)
	sent, err := pub.Send(ctx, f.routingKey, body, sendOpts...)
	for try := 0; errors.Is(err, acemq.ErrLost) && try < publishLostRetries && ctx.Err() == nil; try++ {
		fmt.Fprintf(f.Cmd.ErrOrStderr(), "the connection was lost before the broker confirmed %s; sending it again with the same id (a consumer may see it twice)\n", env.ID())
		sent, err = pub.Send(ctx, f.routingKey, body, sendOpts...)
	}
	if err != nil {
		return publishError(ctx, s, err)
	}
	fmt.Fprintln(f.Cmd.OutOrStdout(), sent.ID())
	return nil
}

// copies counts what publish --count did.
type copies struct {
	confirmed, resent int
	stopErr           error // the first failure other than a lost connection
	bar               *progressbar.ProgressBar
}

// sendCopies publishes --count copies in batches of publishBatch, prints
// each confirmed id, and reports the count on standard error.
func (f *Options) sendCopies(ctx context.Context, s *cli.Session, pub *acemq.Publisher[[]byte], body []byte) error {
	cmd := f.Cmd
	var c copies
	if cli.StderrIsTerminal(cmd) {
		c.bar = progressbar.NewOptions(f.count, progressbar.OptionSetWriter(cmd.ErrOrStderr()),
			progressbar.OptionSetDescription("publishing"), progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	for start := 1; start <= f.count && c.stopErr == nil; start += publishBatch {
		batch := make([]acemq.Outgoing[[]byte], min(publishBatch, f.count-start+1))
		for i := range batch {
			env, err := f.envelope(start + i)
			if err != nil {
				return cli.WithCode(cli.ExitFailure, err)
			}
			batch[i] = acemq.Outgoing[[]byte]{RoutingKey: f.routingKey, Payload: body, Envelope: env}
		}
		f.sendBatch(ctx, pub, batch, &c)
	}
	if c.bar != nil {
		_ = c.bar.Finish()
	}
	msg := fmt.Sprintf("confirmed %d of %d", c.confirmed, f.count)
	if c.resent > 0 {
		msg += fmt.Sprintf(" (%d sent again after the connection was lost; a consumer may see those twice)", c.resent)
	}
	fmt.Fprintln(cmd.ErrOrStderr(), msg)
	if c.stopErr != nil {
		return publishError(ctx, s, c.stopErr)
	}
	return nil
}

// sendBatch publishes batch, and again what a lost connection left
// unconfirmed, until all is confirmed or something else fails.
func (f *Options) sendBatch(ctx context.Context, pub *acemq.Publisher[[]byte], batch []acemq.Outgoing[[]byte], c *copies) {
	out := f.Cmd.OutOrStdout()
	for try := 0; len(batch) > 0; try++ {
		results, _ := pub.SendAll(ctx, batch)
		var again []acemq.Outgoing[[]byte]
		for i, r := range results {
			switch {
			case r.Err == nil:
				c.confirmed++
				fmt.Fprintln(out, r.Envelope.ID())
				if c.bar != nil {
					_ = c.bar.Add(1)
				}
			case errors.Is(r.Err, acemq.ErrLost) && try < publishLostRetries && ctx.Err() == nil:
				again = append(again, batch[i])
			case c.stopErr == nil:
				c.stopErr = r.Err
			}
		}
		c.resent += len(again)
		batch = again
		if c.stopErr != nil {
			return
		}
	}
}

// prepare encodes body with --codec and encrypts it with --encrypt, and
// settles the content type.
func (f *Options) prepare(body []byte) ([]byte, error) {
	if f.encrypt != (f.keyring != "") {
		return nil, errors.New("--encrypt and --keyring go together: --encrypt --keyring FILE encrypts with the file's current key")
	}
	if f.codec != "" {
		if f.ct != "" {
			return nil, errors.New("--codec sets the content type: give --codec or --content-type, not both")
		}
		c, err := codec.Lookup(f.codec)
		if err != nil {
			return nil, fmt.Errorf("--codec: %w", err)
		}
		if body, err = cli.EncodeWith(c, f.codec, body); err != nil {
			return nil, err
		}
		f.ct = c.ContentType()
	}
	if f.ct == "" {
		f.ct = cli.GuessContentType(body)
	}
	if f.encrypt {
		keys, err := cli.LoadKeyring(f.keyring)
		if err != nil {
			return nil, err
		}
		if body, err = keys.Seal(body); err != nil {
			return nil, err
		}
		f.ct = encrypted.ContentType
	}
	return body, nil
}

// publishError maps a publish failure to an exit code.
func publishError(ctx context.Context, s *cli.Session, err error) error {
	var re *driver.ReturnError
	switch {
	case errors.As(err, &re):
		return cli.WithCode(cli.ExitUnroutable, fmt.Errorf("unroutable: no queue is bound for exchange %q and routing key %q (%d %s); nothing was delivered%s", re.Exchange, re.RoutingKey, re.Code, re.Text, s.Hint()))
	case errors.Is(err, acemq.ErrNotFound):
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("%w (declare the exchange first)%s", err, s.Hint()))
	case ctx.Err() == context.DeadlineExceeded:
		return cli.WithCode(cli.ExitTimeout, fmt.Errorf("timed out: %w", err))
	}
	return cli.WithCode(cli.ExitFailure, err)
}
