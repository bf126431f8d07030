// Package consume is the consume command: it reads a queue through a
// browser (taking each message printed, or with --requeue none), or with
// --offset a stream through a stream reader, and prints every message as
// text or as a JSON line.
package consume

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/claimcheck"
	"github.com/acemq/acemq/codec/encrypted"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/stream"
	"github.com/spf13/cobra"
)

// Options are consume's flags, read by NewCmd's command.
type Options struct {
	cli.Invocation
	stream bool          // --offset was given: a stream read
	start  stream.Offset // --offset, parsed

	queue   string
	count   int
	timeout time.Duration
	requeue bool
	json    bool
	offset  string // a stream start (stream.ParseOffset); empty: not a stream read
	keyring string
}

// deliveryJSON is what a line of consume --json adds after the envelope's
// JSON form: the delivery's own fields.
type deliveryJSON struct {
	RoutingKey  string `json:"routingKey"`
	Exchange    string `json:"exchange"`
	ContentType string `json:"contentType"`
	Redelivered bool   `json:"redelivered"`
	ReplyTo     string `json:"replyTo"`
	// Offset is the stream offset, on messages read with --offset only.
	Offset     *int64  `json:"offset,omitempty"`
	Body       *string `json:"body,omitempty"`
	BodyBase64 *string `json:"bodyBase64,omitempty"`
	// KeyID is the key id of an encrypted body (docs/wire.md §4.2), read
	// without a key.
	KeyID string `json:"keyId,omitempty"`
	// Decrypted is true when --keyring opened the body: body (or
	// bodyBase64) is then the plaintext.
	Decrypted bool `json:"decrypted,omitempty"`
}

// NewCmd is the consume command. When runF is not nil it runs instead of
// the command's own run, once the flags are read and valid.
func NewCmd(runF func(*Options) error) *cobra.Command {
	f := &Options{}
	cmd := &cobra.Command{
		Use:   "consume --queue Q [--count N] [--timeout D] [--requeue] [--offset O] [--json] [--keyring FILE]",
		Short: "Read messages from a queue, acknowledging them (or putting them back)",
		Long: `consume reads messages from a queue one at a time (basic.get) and prints
each: its envelope, delivery details and body. Each message is acknowledged
after it is printed, so it leaves the queue.

With --requeue nothing is taken: every message read is held unacknowledged
until the read is over and then put back (nack with requeue), so the same
message is never read twice in one run. Put-back messages return marked
redelivered, and RabbitMQ counts that against a quorum queue's delivery limit.

Without --count it reads until the queue is empty. With --count N it reads N
messages, waiting for more to arrive until --timeout has passed since the
start, and exits 3 if fewer than N came.

--json prints one JSON object per line: the envelope fields exactly as
'acemq envelope decode' prints them, plus routingKey, exchange, contentType,
redelivered, replyTo, and body (UTF-8 text) or bodyBase64 (anything else).

An encrypted body (content type application/vnd.acemq.encrypted) shows its
key id (keyId in --json). With --keyring FILE it is decrypted and the
plaintext is printed in its place (decrypted: true). A body the keyring
cannot open is reported with its key id on standard error and left on the
queue (never taken), and consume exits 1 when the read is over.

--offset first|last|next|N|RFC3339-time reads a stream instead, from that
point, through a stream reader: nothing is taken (reading a stream never
removes messages), every message shows its offset ("offset" in --json), and
without --count the read ends once no message has come for a second (a
stream has no "empty") or at --timeout.`,
		Example: `  acemq consume --queue orders.new.dlq --requeue
  acemq consume --queue orders.new --count 5 --timeout 30s --json | jq .body
  acemq consume --queue orders.events --offset first --count 100 --json | jq .offset
  acemq consume --queue orders.events --offset 2026-01-02T15:00:00Z`,
		Args: cobra.NoArgs,
		RunE: cli.RunE(f, runF),
	}
	f.addFlags(cmd)
	return cmd
}

// Complete records the command and whether --offset asks for a stream
// read.
func (f *Options) Complete(cmd *cobra.Command, args []string) {
	f.Invocation.Complete(cmd, args)
	f.stream = cmd.Flags().Changed("offset")
}

// addFlags defines consume's flags on cmd.
func (f *Options) addFlags(cmd *cobra.Command) {
	cli.AddBrokerFlags(cmd, cli.SharedURLDefault)
	cli.AddWaitFlag(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.queue, "queue", "", "queue to read")
	fl.IntVar(&f.count, "count", 0, "read this many messages (0: until the queue is empty)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "with --count, how long to wait for the messages; otherwise a bound on the whole read")
	fl.BoolVar(&f.requeue, "requeue", false, "put every message back when done: look without taking")
	fl.BoolVar(&f.json, "json", false, "print one JSON object per message")
	fl.StringVar(&f.offset, "offset", "", "read a stream from first, last, next, an offset N or an RFC 3339 time")
	cli.AddKeyringFlag(cmd, &f.keyring)
	_ = cmd.MarkFlagRequired("queue")
}

// Validate checks the flags before anything connects.
func (f *Options) Validate() error {
	if f.count < 0 {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--count must not be negative, not %d", f.count))
	}
	if f.timeout <= 0 {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--timeout must be positive, not %s", f.timeout))
	}
	if !f.stream {
		return nil
	}
	if f.requeue {
		return cli.WithCode(cli.ExitFailure, errors.New("--requeue does not apply with --offset: reading a stream never removes messages, so there is nothing to put back"))
	}
	start, err := stream.ParseOffset(f.offset)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--offset: %w", err))
	}
	f.start = start
	return nil
}

// Run reads the queue, or with --offset the stream.
func (f *Options) Run() error {
	if f.stream {
		return f.runStream()
	}
	return f.browse()
}

// browse reads the queue through a browser, taking each message printed
// (or, with --requeue, putting every one back at the end).
func (f *Options) browse() (err error) {
	cmd := f.Cmd
	keys, err := cli.LoadKeyring(f.keyring)
	if err != nil {
		return err
	}
	s, err := cli.OpenSession(cmd, "")
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	b, err := queues.Browse(ctx, s.Conn, f.queue)
	if errors.Is(err, acemq.ErrNotFound) {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("queue %q does not exist%s", f.queue, s.Hint()))
	}
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	defer func() {
		// Put back everything still held (all that was read, with
		// --requeue), whatever happened.
		if cerr := b.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("putting the messages back on %s: %w", f.queue, cerr)
		}
	}()
	read, unopened, err := f.read(ctx, b, keys)
	if err != nil {
		return err
	}
	if !f.json {
		verb := "took"
		if f.requeue {
			verb = "looked at (and put back)"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%s %d message(s) from %s\n", verb, read, f.queue)
	}
	return f.outcome(ctx, read, unopened)
}

// read prints the queue's messages until --count were read, the queue is
// empty (without --count) or ctx ends, and takes each one printed unless
// --requeue, or the keyring could not open it.
func (f *Options) read(ctx context.Context, b *queues.Browser, keys *encrypted.Codec) (read, unopened int, err error) {
	out := f.Cmd.OutOrStdout()
	wait := 10 * time.Millisecond
	for f.count == 0 || read < f.count {
		m, ok, gerr := b.Next(ctx)
		if gerr != nil {
			if ctx.Err() != nil {
				break
			}
			return read, unopened, cli.WithCode(cli.ExitFailure, fmt.Errorf("reading %s: %w", f.queue, gerr))
		}
		if !ok {
			if f.count == 0 || !sleep(ctx, &wait) {
				break
			}
			continue
		}
		wait = 10 * time.Millisecond
		read++
		o := cli.OpenBody(keys, m.Message)
		if perr := PrintMessage(out, read, m.Message, f.json, o); perr != nil {
			return read, unopened, cli.WithCode(cli.ExitFailure, perr) // m is held: Close puts it back
		}
		if o.Failed() {
			// Held, never taken: Close puts it back on the queue.
			unopened++
			cli.ReportUnopened(f.Cmd.ErrOrStderr(), read, m.Message, o, "it stays on "+f.queue)
			continue
		}
		if !f.requeue {
			if terr := b.Take(m); terr != nil {
				return read, unopened, cli.WithCode(cli.ExitFailure, fmt.Errorf("acknowledging message %d: %w", read, terr))
			}
		}
	}
	return read, unopened, nil
}

// sleep waits *wait, doubling it up to 250ms for the next time, and
// reports whether ctx is still live.
func sleep(ctx context.Context, wait *time.Duration) bool {
	select {
	case <-ctx.Done():
	case <-time.After(*wait):
		*wait = min(*wait*2, 250*time.Millisecond)
	}
	return ctx.Err() == nil
}

// outcome is the command's result once read messages were read, unopened
// of them not opened by the keyring.
func (f *Options) outcome(ctx context.Context, read, unopened int) error {
	if f.Cmd.Context().Err() != nil {
		return cli.WithCode(cli.ExitFailure, errors.New("interrupted"))
	}
	if unopened > 0 {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("%d of %d message(s) could not be opened with the keyring %s and were left on %s", unopened, read, f.keyring, f.queue))
	}
	if f.count > 0 && read < f.count {
		return cli.WithCode(cli.ExitTimeout, fmt.Errorf("timed out after %s: read %d of %d messages from %s", f.timeout, read, f.count, f.queue))
	}
	if f.count == 0 && ctx.Err() != nil {
		return cli.WithCode(cli.ExitTimeout, fmt.Errorf("timed out after %s reading %s (read %d)", f.timeout, f.queue, read))
	}
	return nil
}

// messageJSON is one line of consume --json: the envelope's JSON form (the
// library's, exactly as envelope decode prints it), then the delivery's
// fields, spliced into one object.
func messageJSON(m acemq.Message[[]byte], o cli.Opened) ([]byte, error) {
	env, err := m.Envelope.MarshalJSON()
	if err != nil {
		return nil, err
	}
	d := deliveryJSON{RoutingKey: m.RoutingKey, Exchange: m.Exchange, ContentType: m.ContentType, Redelivered: m.Redelivered, ReplyTo: m.ReplyTo}
	if m.FromStream {
		d.Offset = &m.Offset
	}
	d.Body, d.BodyBase64 = cli.BodyJSON(m.Body)
	d.KeyID = o.KeyID
	if o.Decrypted {
		d.Body, d.BodyBase64 = cli.BodyJSON(o.Plain)
		d.Decrypted = true
	}
	rest, err := cli.MarshalLine(d)
	if err != nil {
		return nil, err
	}
	// {"id":…,"headers":{…}} and {"routingKey":…}\n make
	// {"id":…,"headers":{…},"routingKey":…}\n.
	line := make([]byte, 0, len(env)+len(rest))
	line = append(line, env[:len(env)-1]...)
	line = append(line, ',')
	return append(line, rest[1:]...), nil
}

// PrintMessage prints one message, as text or as one JSON line.
func PrintMessage(w io.Writer, n int, m acemq.Message[[]byte], asJSON bool, o cli.Opened) error {
	if asJSON {
		line, err := messageJSON(m, o)
		if err != nil {
			return err
		}
		_, err = w.Write(line)
		return err
	}
	var b strings.Builder
	if err := writeEnvelope(&b, n, m); err != nil {
		return err
	}
	writeBody(&b, m, o)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeEnvelope writes the text form of m's delivery and envelope.
func writeEnvelope(b *strings.Builder, n int, m acemq.Message[[]byte]) error {
	env := m.Envelope
	fmt.Fprintf(b, "--- message %d: exchange=%q routingKey=%q contentType=%q redelivered=%t", n, m.Exchange, m.RoutingKey, m.ContentType, m.Redelivered)
	if m.FromStream {
		fmt.Fprintf(b, " offset=%d", m.Offset)
	}
	b.WriteString("\n")
	fmt.Fprintf(b, "    id=%s type=%s version=%d attempt=%d correlation=%s", env.ID(), env.Type(), env.Version(), env.Attempt(), env.CorrelationID())
	if c := env.CausationID(); c != "" {
		fmt.Fprintf(b, " causation=%s", c)
	}
	if o := env.Origin(); o != "" {
		fmt.Fprintf(b, " origin=%s", o)
	}
	if _, known := env.Age(); known {
		fmt.Fprintf(b, " firstSeen=%s", env.FirstSeen().UTC().Format(time.RFC3339Nano))
	}
	b.WriteString("\n")
	if e := env.Reason(); e != "" {
		fmt.Fprintf(b, "    error: %s\n", e)
	}
	if c := env.Claim(); c != "" {
		fmt.Fprintf(b, "    claim: %s\n", c)
	}
	if f := env.Fields(); len(f.Route) > 0 {
		r := f.Route
		fmt.Fprintf(b, "    route: %s (position %d, run %s)\n", strings.Join(r, " → "), f.RoutePosition, f.RouteID)
	}
	if m.ReplyTo != "" {
		fmt.Fprintf(b, "    replyTo: %s\n", m.ReplyTo)
	}
	headers, err := cli.HeadersJSON(env)
	if err != nil {
		return err
	}
	for _, k := range cli.SortedKeys(env.Headers()) {
		fmt.Fprintf(b, "    header %s: %s\n", k, headers[jsonName(k)])
	}
	return nil
}

// writeBody writes the text form of m's body: what claim check and
// encryption say about it, then the body (or the plaintext o opened).
func writeBody(b *strings.Builder, m acemq.Message[[]byte], o cli.Opened) {
	if key, ok := claimcheck.KeyOf(m.Body); ok {
		fmt.Fprintf(b, "    claim check: the payload is in the producer's store under key %s; the body is only the reference\n", key)
	} else if claimcheck.IsFramed(m.Body) {
		fmt.Fprintf(b, "    claim check: an inline payload behind a 3-byte frame\n")
	}
	body := m.Body
	switch {
	case o.Decrypted:
		fmt.Fprintf(b, "    encrypted: key id %s; decrypted with --keyring, the plaintext follows\n", o.KeyID)
		body = o.Plain
	case o.Err != nil:
		fmt.Fprintf(b, "    encrypted: key id %s; the keyring cannot open it: %v\n", o.KeyID, o.Err)
	case o.Encrypted && o.KeyID != "":
		fmt.Fprintf(b, "    encrypted: key id %s; give --keyring FILE to read it\n", o.KeyID)
	}
	text, b64 := cli.BodyJSON(body)
	if text != nil {
		b.WriteString(*text)
		if !strings.HasSuffix(*text, "\n") {
			b.WriteString("\n")
		}
	} else {
		fmt.Fprintf(b, "(%d bytes, not UTF-8; base64) %s\n", len(body), *b64)
	}
}

// jsonName is name as a JSON object's key reads back: encoding/json writes
// each byte that is not UTF-8 as U+FFFD.
func jsonName(name string) string {
	if utf8.ValidString(name) {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(name[i : i+size])
		}
		i += size
	}
	return b.String()
}
