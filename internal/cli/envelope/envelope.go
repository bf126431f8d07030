// Package envelope is the envelope command: decode turns a message's
// headers into the envelope the library reads from them, encode an
// envelope into the headers a publish writes, both as JSON and without a
// broker.
package envelope

import (
	"errors"
	"fmt"
	"io"

	"github.com/acemq/acemq/internal/cli"
	"github.com/spf13/cobra"
)

// Options are what decode and encode run with: they read standard input
// and take no flags.
type Options struct {
	cli.Invocation
	convert func([]byte) ([]byte, error) // Decode or Encode
}

// NewCmd is the envelope command and its subcommands decode and encode.
// When runF is not nil it runs instead of a subcommand's own Run.
func NewCmd(runF func(*Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "envelope",
		Short: "Decode or encode an AceMQ envelope as JSON (no broker)",
		Long: `envelope decode and envelope encode turn the headers of a message into the
envelope the library reads from them, and an envelope into the headers a
publish puts on the wire. Neither talks to a broker.

Header values are JSON values; a byte string is {"$bytes": "<base64>"}.
Integral numbers stay integers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.WithCode(cli.ExitFailure, errors.New("envelope needs a subcommand: decode or encode (see 'acemq envelope --help')"))
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:     "decode",
		Short:   "Read {routingKey, messageId, headers} on stdin; print the envelope",
		Long:    decodeLong,
		Example: `  echo '{"routingKey":"order.placed","messageId":"m-1","headers":{"x-acemq-attempt":2,"x-tenant":"acme"}}' | acemq envelope decode`,
		Args:    cobra.NoArgs,
		RunE:    cli.RunE(&Options{convert: Decode}, runF),
	})
	cmd.AddCommand(&cobra.Command{
		Use:     "encode",
		Short:   "Read {routingKey, envelope} on stdin; print the message-id and wire headers",
		Long:    encodeLong,
		Example: `  echo '{"routingKey":"order.placed","envelope":{"id":"11111111-2222-3333-4444-555555555555","firstSeen":1767323045678}}' | acemq envelope encode`,
		Args:    cobra.NoArgs,
		RunE:    cli.RunE(&Options{convert: Encode}, runF),
	})
	return cmd
}

// decodeLong is the help of envelope decode.
const decodeLong = `decode reads one JSON object on standard input,

  {"routingKey": "...", "messageId": "...", "headers": {...}}

and prints the envelope the library reads from it, as one JSON object:

  {"id","type","version","correlationId","causationId","attempt",
   "firstSeen","origin","error","claim","route","routePosition","routeId",
   "headers"}

firstSeen is epoch milliseconds, or null when the message carried none;
absent strings print as ""; route is [] when there is none; headers holds the
application headers only (never an x-acemq-* name). Other keys in the input
are ignored, so a case of the envelope fixture file can be piped in as is.`

// encodeLong is the help of envelope encode.
const encodeLong = `encode reads one JSON object on standard input,

  {"routingKey": "...", "envelope": {same field names as decode prints}}

builds the envelope (absent fields take the library's defaults: a fresh id,
correlation = id, version and attempt 1, first seen now, origin
acemq@<this host> as a connection stamps it; an explicit "origin": "" means
none, as decode prints an absent origin) and prints exactly
the headers a publish with that routing key puts on the wire, with the AMQP
message-id:

  {"messageId": "...", "headers": {...}}

Numbers print as JSON integers. A reserved (x-acemq-*) name among the
application headers is refused: the command exits 1 naming it.`

// maxEnvelopeInput bounds what envelope decode and encode read.
const maxEnvelopeInput = 16 << 20

// Validate has nothing to check: decode and encode take no flags.
func (o *Options) Validate() error { return nil }

// Run converts standard input, at most maxEnvelopeInput bytes, and prints
// the result.
func (o *Options) Run() error {
	cmd := o.Cmd
	in, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxEnvelopeInput+1))
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("reading standard input: %w", err))
	}
	if len(in) > maxEnvelopeInput {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("the input is larger than %d bytes", maxEnvelopeInput))
	}
	out, err := o.convert(in)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	_, err = cmd.OutOrStdout().Write(out)
	return err
}
