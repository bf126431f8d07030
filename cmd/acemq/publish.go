package main

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
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// seqHeader numbers the copies of publish --count.
const seqHeader = "acemq-cli-seq"

// publishBatch is how many copies publish --count sends before awaiting
// their confirms.
const publishBatch = 200

// publishLostRetries bounds how often a copy whose connection died before
// its confirm is sent again.
const publishLostRetries = 5

type publishFlags struct {
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

func newPublishCmd() *cobra.Command {
	var f publishFlags
	cmd := &cobra.Command{
		Use:   "publish --exchange E --routing-key K [flags] [BODY | -]",
		Short: "Publish a message, confirmed and mandatory; print its id",
		Long: `publish sends one message (or --count copies) with an AceMQ envelope,
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
the routing key; nothing more is sent); 3 --timeout passed; 1 anything else.`,
		Example: `  acemq publish --exchange orders --routing-key order.placed '{"id":"o-1"}'
  echo '{"id":"o-2"}' | acemq publish --exchange "" --routing-key orders.new --header x-tenant=acme -
  acemq publish --exchange orders --routing-key order.placed --count 10000 '{"load":"test"}'
  acemq publish --exchange billing --routing-key invoice.due --delay 90s '{"invoice":"i-7"}'
  acemq publish --exchange billing --routing-key invoice.due --at 2026-12-01T09:00:00Z '{"invoice":"i-8"}'
  acemq publish --exchange "" --routing-key jobs --priority 9 --ttl 30s '{"job":"urgent"}'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPublish(cmd, args, f)
		},
	}
	addBrokerFlags(cmd, sharedURLDefault)
	addWaitFlag(cmd)
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
	addKeyringFlag(cmd, &f.keyring)
	fl.BoolVar(&f.encrypt, "encrypt", false, "encrypt the body with the current key of --keyring")
	_ = cmd.MarkFlagRequired("exchange")
	_ = cmd.MarkFlagRequired("routing-key")
	return cmd
}

func runPublish(cmd *cobra.Command, args []string, f publishFlags) error {
	if f.count < 1 {
		return withCode(exitFailure, fmt.Errorf("--count must be at least 1, not %d", f.count))
	}
	if f.exchange == "" && f.routingKey == "" {
		return withCode(exitFailure, errors.New("--routing-key is empty: on the default exchange it must name a queue"))
	}
	headers, err := parseHeaders(f.headers)
	if err != nil {
		return err
	}
	if err := f.later.check(f); err != nil {
		return err
	}
	body, err := readBody(cmd, args)
	if err != nil {
		return err
	}
	body, err = f.prepare(body)
	if err != nil {
		return withCode(exitFailure, err)
	}
	if f.later.scheduled() {
		return runSchedule(cmd, f, headers, body)
	}
	ctx, cancel := within(cmd.Context(), f.timeout)
	defer cancel()
	s, err := openSession(cmd, "")
	if err != nil {
		return err
	}
	defer s.close()

	opts := []acemq.PublisherOption{acemq.WithCodec(rawCodec{contentType: f.ct})}
	if f.transient {
		opts = append(opts, acemq.WithPersistent(false))
	}
	pub := acemq.NewPublisher[[]byte](s.conn, f.exchange, opts...)
	newEnv := func(seq int) (acemq.Envelope, error) {
		h := headers
		if f.count > 1 {
			h = make(map[string]any, len(headers)+1)
			for k, v := range headers {
				h[k] = v
			}
			h[seqHeader] = int64(seq)
		}
		return acemq.NewEnvelope(acemq.Fields{Type: f.typ, CorrelationID: f.correlationID, CausationID: f.causationID, Headers: h})
	}

	out := cmd.OutOrStdout()
	if f.count == 1 {
		env, err := newEnv(1)
		if err != nil {
			return withCode(exitFailure, err)
		}
		sendOpts := append([]acemq.SendOption{acemq.WithEnvelope(env)}, f.later.sendOptions()...)
		sent, err := pub.Send(ctx, f.routingKey, body, sendOpts...)
		for try := 0; errors.Is(err, acemq.ErrLost) && try < publishLostRetries && ctx.Err() == nil; try++ {
			fmt.Fprintf(cmd.ErrOrStderr(), "the connection was lost before the broker confirmed %s; sending it again with the same id (a consumer may see it twice)\n", env.ID())
			sent, err = pub.Send(ctx, f.routingKey, body, sendOpts...)
		}
		if err != nil {
			return publishError(ctx, s, err)
		}
		fmt.Fprintln(out, sent.ID())
		return nil
	}

	var bar *progressbar.ProgressBar
	if stderrIsTerminal(cmd) {
		bar = progressbar.NewOptions(f.count, progressbar.OptionSetWriter(cmd.ErrOrStderr()),
			progressbar.OptionSetDescription("publishing"), progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	confirmed, resent := 0, 0
	var stopErr error
	for start := 1; start <= f.count && stopErr == nil; start += publishBatch {
		n := min(publishBatch, f.count-start+1)
		batch := make([]acemq.Outgoing[[]byte], n)
		for i := range batch {
			env, err := newEnv(start + i)
			if err != nil {
				return withCode(exitFailure, err)
			}
			batch[i] = acemq.Outgoing[[]byte]{RoutingKey: f.routingKey, Payload: body, Envelope: env}
		}
		for try := 0; len(batch) > 0; try++ {
			results, _ := pub.SendAll(ctx, batch)
			var again []acemq.Outgoing[[]byte]
			for i, r := range results {
				switch {
				case r.Err == nil:
					confirmed++
					fmt.Fprintln(out, r.Envelope.ID())
					if bar != nil {
						_ = bar.Add(1)
					}
				case errors.Is(r.Err, acemq.ErrLost) && try < publishLostRetries && ctx.Err() == nil:
					again = append(again, batch[i])
				case stopErr == nil:
					stopErr = r.Err
				}
			}
			resent += len(again)
			batch = again
			if stopErr != nil {
				break
			}
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	msg := fmt.Sprintf("confirmed %d of %d", confirmed, f.count)
	if resent > 0 {
		msg += fmt.Sprintf(" (%d sent again after the connection was lost; a consumer may see those twice)", resent)
	}
	fmt.Fprintln(cmd.ErrOrStderr(), msg)
	if stopErr != nil {
		return publishError(ctx, s, stopErr)
	}
	return nil
}

// prepare encodes body with --codec and encrypts it with --encrypt, and
// settles the content type.
func (f *publishFlags) prepare(body []byte) ([]byte, error) {
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
		if body, err = encodeWith(c, f.codec, body); err != nil {
			return nil, err
		}
		f.ct = c.ContentType()
	}
	if f.ct == "" {
		f.ct = guessContentType(body)
	}
	if f.encrypt {
		keys, err := loadKeyring(f.keyring)
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
func publishError(ctx context.Context, s *session, err error) error {
	var re *driver.ReturnError
	switch {
	case errors.As(err, &re):
		return withCode(exitUnroutable, fmt.Errorf("unroutable: no queue is bound for exchange %q and routing key %q (%d %s); nothing was delivered%s", re.Exchange, re.RoutingKey, re.Code, re.Text, s.hint()))
	case errors.Is(err, acemq.ErrNotFound):
		return withCode(exitFailure, fmt.Errorf("%w (declare the exchange first)%s", err, s.hint()))
	case ctx.Err() == context.DeadlineExceeded:
		return withCode(exitTimeout, fmt.Errorf("timed out: %w", err))
	}
	return withCode(exitFailure, err)
}
