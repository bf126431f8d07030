package rpc

import (
	"time"

	"github.com/acemq/acemq"
)

// The package's options follow the module's rule: every option is a
// function named With…, returning one of the option interfaces below.
// Serve takes acemq.ConsumeOption values (acemq.WithConcurrency,
// acemq.WithCodec, …): a responder is a consumer.

// A RequesterOption configures Open.
type RequesterOption interface{ applyRequester(*requesterConfig) }

// A CallOption configures one Ask.
type CallOption interface{ applyCall(*callConfig) }

// An Option configures both: given to Open, every call of the requester;
// given to Ask, that call.
type Option interface {
	RequesterOption
	CallOption
}

type requesterConfig struct {
	timeout    time.Duration
	codec      acemq.Codec
	replyQueue string
}

type callConfig struct {
	timeout time.Duration
	env     acemq.Envelope
}

type requesterOption func(*requesterConfig)

func (f requesterOption) applyRequester(c *requesterConfig) { f(c) }

type callOption func(*callConfig)

func (f callOption) applyCall(c *callConfig) { f(c) }

type timeoutOption time.Duration

func (o timeoutOption) applyRequester(c *requesterConfig) { c.timeout = time.Duration(o) }
func (o timeoutOption) applyCall(c *callConfig)           { c.timeout = time.Duration(o) }

// WithTimeout sets how long a call waits for its reply: given to Open, for
// every call (default 30 s); given to Ask, for that call. Zero or negative
// is refused, by Open and by Ask, rather than making a call that cannot
// succeed. A call also ends with its context.
func WithTimeout(d time.Duration) Option { return timeoutOption(d) }

// WithReplyQueue makes the requester answer on a named queue instead of a
// generated one: an ordinary durable quorum queue that survives restarts,
// declared without a dead-letter half (WithDeadLettering(false): every
// reply is accepted, none is set aside).
// That is a decision, not a convenience: a named reply queue that outlives
// its requester collects answers nobody is waiting for.
func WithReplyQueue(name string) RequesterOption {
	return requesterOption(func(c *requesterConfig) { c.replyQueue = name })
}

// WithCodec sets the codec that encodes requests and decodes replies
// (default acemq.JSON). A responder's codec is its consumer's: pass
// acemq.WithCodec to Serve.
func WithCodec(c acemq.Codec) RequesterOption {
	return requesterOption(func(o *requesterConfig) { o.codec = c })
}

// WithEnvelope asks with env (built with acemq.NewEnvelope) instead of a
// fresh envelope. Its type, version, causation, origin and headers are sent
// as given; its id and correlation are replaced by the call's own id, which
// is what pairs the reply with the call. An empty origin is stamped with the
// connection's.
func WithEnvelope(env acemq.Envelope) CallOption {
	return callOption(func(c *callConfig) { c.env = env })
}
