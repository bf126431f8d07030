package main

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
	"github.com/spf13/cobra"
)

type consumeFlags struct {
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

func newConsumeCmd() *cobra.Command {
	var f consumeFlags
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
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsume(cmd, f)
		},
	}
	addBrokerFlags(cmd, sharedURLDefault)
	addWaitFlag(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.queue, "queue", "", "queue to read")
	fl.IntVar(&f.count, "count", 0, "read this many messages (0: until the queue is empty)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "with --count, how long to wait for the messages; otherwise a bound on the whole read")
	fl.BoolVar(&f.requeue, "requeue", false, "put every message back when done: look without taking")
	fl.BoolVar(&f.json, "json", false, "print one JSON object per message")
	fl.StringVar(&f.offset, "offset", "", "read a stream from first, last, next, an offset N or an RFC 3339 time")
	addKeyringFlag(cmd, &f.keyring)
	_ = cmd.MarkFlagRequired("queue")
	return cmd
}

func runConsume(cmd *cobra.Command, f consumeFlags) (err error) {
	if f.count < 0 {
		return withCode(exitFailure, fmt.Errorf("--count must not be negative, not %d", f.count))
	}
	if f.timeout <= 0 {
		return withCode(exitFailure, fmt.Errorf("--timeout must be positive, not %s", f.timeout))
	}
	if cmd.Flags().Changed("offset") {
		return runConsumeStream(cmd, f)
	}
	keys, err := loadKeyring(f.keyring)
	if err != nil {
		return err
	}
	s, err := openSession(cmd, "")
	if err != nil {
		return err
	}
	defer s.close()
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	b, err := s.conn.Browse(ctx, f.queue)
	if errors.Is(err, acemq.ErrNotFound) {
		return withCode(exitFailure, fmt.Errorf("queue %q does not exist%s", f.queue, s.hint()))
	}
	if err != nil {
		return withCode(exitFailure, err)
	}
	defer func() {
		// Put back everything still held (all that was read, with
		// --requeue), whatever happened.
		if cerr := b.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("putting the messages back on %s: %w", f.queue, cerr)
		}
	}()

	out := cmd.OutOrStdout()
	read, unopened := 0, 0
	wait := 10 * time.Millisecond
	for f.count == 0 || read < f.count {
		m, ok, gerr := b.Next(ctx)
		if gerr != nil {
			if ctx.Err() != nil {
				break
			}
			return withCode(exitFailure, fmt.Errorf("reading %s: %w", f.queue, gerr))
		}
		if !ok {
			if f.count == 0 {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
				wait = min(wait*2, 250*time.Millisecond)
			}
			if ctx.Err() != nil {
				break
			}
			continue
		}
		wait = 10 * time.Millisecond
		read++
		o := openBody(keys, m)
		if perr := printMessage(out, read, m, f.json, o); perr != nil {
			return withCode(exitFailure, perr) // m is held: Close puts it back
		}
		if o.failed() {
			// Held, never taken: Close puts it back on the queue.
			unopened++
			reportUnopened(cmd.ErrOrStderr(), read, m, o, "it stays on "+f.queue)
			continue
		}
		if !f.requeue {
			if terr := b.Take(m); terr != nil {
				return withCode(exitFailure, fmt.Errorf("acknowledging message %d: %w", read, terr))
			}
		}
	}
	if !f.json {
		verb := "took"
		if f.requeue {
			verb = "looked at (and put back)"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%s %d message(s) from %s\n", verb, read, f.queue)
	}
	if cmd.Context().Err() != nil {
		return withCode(exitFailure, errors.New("interrupted"))
	}
	if unopened > 0 {
		return withCode(exitFailure, fmt.Errorf("%d of %d message(s) could not be opened with the keyring %s and were left on %s", unopened, read, f.keyring, f.queue))
	}
	if f.count > 0 && read < f.count {
		return withCode(exitTimeout, fmt.Errorf("timed out after %s: read %d of %d messages from %s", f.timeout, read, f.count, f.queue))
	}
	if f.count == 0 && ctx.Err() != nil {
		return withCode(exitTimeout, fmt.Errorf("timed out after %s reading %s (read %d)", f.timeout, f.queue, read))
	}
	return nil
}

// messageJSON is one line of consume --json: the envelope's JSON form (the
// library's, exactly as envelope decode prints it), then the delivery's
// fields, spliced into one object.
func messageJSON(m acemq.Message[[]byte], o opened) ([]byte, error) {
	env, err := m.Envelope.MarshalJSON()
	if err != nil {
		return nil, err
	}
	d := deliveryJSON{RoutingKey: m.RoutingKey, Exchange: m.Exchange, ContentType: m.ContentType, Redelivered: m.Redelivered, ReplyTo: m.ReplyTo}
	if m.FromStream {
		d.Offset = &m.Offset
	}
	d.Body, d.BodyBase64 = bodyJSON(m.Body)
	d.KeyID = o.keyID
	if o.decrypted {
		d.Body, d.BodyBase64 = bodyJSON(o.plain)
		d.Decrypted = true
	}
	rest, err := marshalLine(d)
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

// printMessage prints one message, as text or as one JSON line.
func printMessage(w io.Writer, n int, m acemq.Message[[]byte], asJSON bool, o opened) error {
	if asJSON {
		line, err := messageJSON(m, o)
		if err != nil {
			return err
		}
		_, err = w.Write(line)
		return err
	}
	env := m.Envelope
	var b strings.Builder
	fmt.Fprintf(&b, "--- message %d: exchange=%q routingKey=%q contentType=%q redelivered=%t", n, m.Exchange, m.RoutingKey, m.ContentType, m.Redelivered)
	if m.FromStream {
		fmt.Fprintf(&b, " offset=%d", m.Offset)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "    id=%s type=%s version=%d attempt=%d correlation=%s", env.ID(), env.Type(), env.Version(), env.Attempt(), env.CorrelationID())
	if c := env.CausationID(); c != "" {
		fmt.Fprintf(&b, " causation=%s", c)
	}
	if o := env.Origin(); o != "" {
		fmt.Fprintf(&b, " origin=%s", o)
	}
	if _, known := env.Age(); known {
		fmt.Fprintf(&b, " firstSeen=%s", env.FirstSeen().UTC().Format(time.RFC3339Nano))
	}
	b.WriteString("\n")
	if e := env.Reason(); e != "" {
		fmt.Fprintf(&b, "    error: %s\n", e)
	}
	if c := env.Claim(); c != "" {
		fmt.Fprintf(&b, "    claim: %s\n", c)
	}
	if f := env.Fields(); len(f.Route) > 0 {
		r := f.Route
		fmt.Fprintf(&b, "    route: %s (position %d, run %s)\n", strings.Join(r, " → "), f.RoutePosition, f.RouteID)
	}
	if m.ReplyTo != "" {
		fmt.Fprintf(&b, "    replyTo: %s\n", m.ReplyTo)
	}
	headers, err := headersJSON(env)
	if err != nil {
		return err
	}
	for _, k := range sortedKeys(env.Headers()) {
		fmt.Fprintf(&b, "    header %s: %s\n", k, headers[jsonName(k)])
	}
	if key, ok := claimcheck.KeyOf(m.Body); ok {
		fmt.Fprintf(&b, "    claim check: the payload is in the producer's store under key %s; the body is only the reference\n", key)
	} else if claimcheck.IsFramed(m.Body) {
		fmt.Fprintf(&b, "    claim check: an inline payload behind a 3-byte frame\n")
	}
	body := m.Body
	switch {
	case o.decrypted:
		fmt.Fprintf(&b, "    encrypted: key id %s; decrypted with --keyring, the plaintext follows\n", o.keyID)
		body = o.plain
	case o.err != nil:
		fmt.Fprintf(&b, "    encrypted: key id %s; the keyring cannot open it: %v\n", o.keyID, o.err)
	case o.encrypted && o.keyID != "":
		fmt.Fprintf(&b, "    encrypted: key id %s; give --keyring FILE to read it\n", o.keyID)
	}
	text, b64 := bodyJSON(body)
	if text != nil {
		b.WriteString(*text)
		if !strings.HasSuffix(*text, "\n") {
			b.WriteString("\n")
		}
	} else {
		fmt.Fprintf(&b, "(%d bytes, not UTF-8; base64) %s\n", len(body), *b64)
	}
	_, err = io.WriteString(w, b.String())
	return err
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
