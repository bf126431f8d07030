package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/rpc"
	"github.com/spf13/cobra"
)

type askFlags struct {
	exchange, routingKey, typ, ct string
	headers                       []string
	timeout                       time.Duration
}

func newAskCmd() *cobra.Command {
	var f askFlags
	cmd := &cobra.Command{
		Use:   "ask --exchange E --routing-key K [--timeout D] [--type T] [BODY | -]",
		Short: "Send a request and print the reply",
		Long: `ask publishes a request (mandatory, confirmed) naming a reply queue of its
own, waits for the answer and prints the reply body, byte for byte, on
standard output. The body is the BODY argument, or standard input when BODY
is - or absent; its content type is --content-type, or guessed as publish
does. Replies are printed whatever their content type.

Exit codes: 0 answered; 2 the responder failed or refused the request (its
error, "TypeName: message", is printed on standard error, saying which); 3
no reply within --timeout (the
request may still be queued, running or done: a timeout says no answer
arrived, not that nothing happened); 4 unroutable (nothing is bound for the
routing key); 1 anything else.`,
		Example: `  acemq ask --exchange "" --routing-key pricing '{"sku":"A-1"}'
  echo '{"sku":"A-1"}' | acemq ask --exchange "" --routing-key pricing --timeout 5s -`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAsk(cmd, args, f)
		},
	}
	addBrokerFlags(cmd, sharedURLDefault)
	addWaitFlag(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.exchange, "exchange", "", `exchange to send the request to ("" is the default exchange)`)
	fl.StringVar(&f.routingKey, "routing-key", "", "routing key (on the default exchange, the responder's queue)")
	fl.StringVar(&f.typ, "type", "", "envelope type (default: the routing key)")
	fl.StringVar(&f.ct, "content-type", "", "content type of the request (default: guessed from the body)")
	fl.StringArrayVar(&f.headers, "header", nil, "application header name=value (repeatable)")
	fl.DurationVar(&f.timeout, "timeout", rpc.DefaultTimeout, "how long to wait for the reply")
	_ = cmd.MarkFlagRequired("exchange")
	_ = cmd.MarkFlagRequired("routing-key")
	return cmd
}

func runAsk(cmd *cobra.Command, args []string, f askFlags) error {
	if f.timeout <= 0 {
		return withCode(exitFailure, fmt.Errorf("--timeout must be positive, not %s", f.timeout))
	}
	headers, err := parseHeaders(f.headers)
	if err != nil {
		return err
	}
	body, err := readBody(cmd, args)
	if err != nil {
		return err
	}
	if f.ct == "" {
		f.ct = guessContentType(body)
	}
	env, err := acemq.NewEnvelope(acemq.Fields{Type: f.typ, Headers: headers})
	if err != nil {
		return withCode(exitFailure, err)
	}
	s, err := openSession(cmd, "")
	if err != nil {
		return err
	}
	defer s.close()

	octx, cancel := context.WithTimeout(cmd.Context(), connectTimeout)
	req, err := rpc.Open[[]byte, []byte](octx, s.conn, f.exchange, f.routingKey, rpc.WithCodec(rawCodec{contentType: f.ct}), rpc.WithTimeout(f.timeout))
	cancel()
	if err != nil {
		return withCode(exitFailure, fmt.Errorf("opening a requester: %w", err))
	}
	defer closeQuietly(req.Close)

	reply, err := req.Ask(cmd.Context(), body, rpc.WithEnvelope(env))
	if err != nil {
		var re *rpc.ResponderError
		var ue *driver.ReturnError
		switch {
		case errors.As(err, &re) && re.Refused:
			return withCode(exitResponder, fmt.Errorf("the responder refused the request: %s", re.Text))
		case errors.As(err, &re):
			return withCode(exitResponder, fmt.Errorf("the responder failed: %s", re.Text))
		case errors.As(err, &ue):
			return withCode(exitUnroutable, fmt.Errorf("unroutable: no queue is bound for exchange %q and routing key %q (%d %s); the request was not delivered%s", ue.Exchange, ue.RoutingKey, ue.Code, ue.Text, s.hint()))
		case errors.Is(err, acemq.ErrNotFound):
			return withCode(exitFailure, fmt.Errorf("%w (declare the exchange first)%s", err, s.hint()))
		case errors.Is(err, rpc.ErrTimeout):
			if cmd.Context().Err() != nil {
				return withCode(exitFailure, errors.New("interrupted while waiting for the reply"))
			}
			return withCode(exitTimeout, fmt.Errorf("no reply within %s (the request may still be queued, running or done)", f.timeout))
		}
		return withCode(exitFailure, err)
	}
	_, err = cmd.OutOrStdout().Write(reply)
	return err
}
