package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
)

// ErrTimeout is matched (errors.Is) by every *TimeoutError: a call that
// ended without a reply.
var ErrTimeout = errors.New("rpc: no reply arrived")

// ErrClosed is matched by the *TimeoutError of a call that was outstanding
// when its requester was closed (or its reply consumer stopped), and by an
// Ask made after Close.
var ErrClosed = errors.New("rpc: the requester is closed")

// TimeoutError reports a call that ended without a reply: its deadline
// passed, its context was cancelled, or the requester was closed while it
// was outstanding. errors.Is matches it against ErrTimeout and, unless the
// caller cancelled it, against context.DeadlineExceeded; a cancelled call
// matches context.Canceled instead, and a call ended by Close matches
// ErrClosed as well.
//
// A timeout says no answer arrived, not that nothing happened: the request
// may still be queued, still being handled, or done with the reply lost.
// Whether to ask again is a question of the responder's idempotency.
type TimeoutError struct {
	// ID is the call's id, correlation and AMQP correlation-id.
	ID         string
	Exchange   string
	RoutingKey string
	// Timeout is the call's timeout.
	Timeout time.Duration
	// Closed is true when the call was failed because the requester was
	// closed (or its reply consumer stopped) while it was outstanding.
	Closed bool
	// Reason says what ended the call, as a sentence fragment.
	Reason string

	cause error
}

// Error says which request got no reply, where it was sent, and why the
// wait ended.
func (e *TimeoutError) Error() string {
	if e.Closed {
		return fmt.Sprintf("rpc: %s while request %s (exchange %q, routing key %q) was outstanding; no reply arrived, which does not mean nothing happened", e.Reason, e.ID, e.Exchange, e.RoutingKey)
	}
	if errors.Is(e.cause, context.Canceled) {
		return fmt.Sprintf("rpc: request %s (exchange %q, routing key %q) was abandoned before a reply arrived: %v; the request may still be handled", e.ID, e.Exchange, e.RoutingKey, e.cause)
	}
	return fmt.Sprintf("rpc: no reply to request %s (exchange %q, routing key %q) %s; the request may still be queued, running or done, so ask again only if the responder is idempotent", e.ID, e.Exchange, e.RoutingKey, e.Reason)
}

// Is reports whether target is ErrTimeout, or context.DeadlineExceeded for
// a call that was not cancelled by its caller.
func (e *TimeoutError) Is(target error) bool {
	switch target {
	case ErrTimeout:
		return true
	case context.DeadlineExceeded:
		return !errors.Is(e.cause, context.Canceled)
	}
	return false
}

// Unwrap returns the cause: context.DeadlineExceeded, context.Canceled or
// ErrClosed.
func (e *TimeoutError) Unwrap() error { return e.cause }

// ResponderError reports a reply carrying acemq-error: the responder failed
// to handle the request and said why. The call fails with it as soon as the
// reply arrives, not at its deadline; the reply's body is not decoded.
type ResponderError struct {
	// ID is the call's id.
	ID string
	// Text is the acemq-error header as the responder wrote it,
	// conventionally "TypeName: message".
	Text string
	// Reply is the envelope of the failure reply.
	Reply acemq.Envelope
	// Refused is true when the responder refused the request with Refuse
	// (an expected business answer: the reply carries acemq-error-kind =
	// refused), false when it failed (an error or a panic), or when its
	// reply does not say (a sibling library, an older responder).
	Refused bool
}

// ErrRefused is matched (errors.Is) by a *ResponderError whose responder
// refused the request with Refuse.
var ErrRefused = errors.New("rpc: the responder refused the request")

// Error names the request and quotes the responder's failure text.
func (e *ResponderError) Error() string {
	if e.Refused {
		return fmt.Sprintf("rpc: the responder refused request %s: %s", e.ID, e.Text)
	}
	return fmt.Sprintf("rpc: the responder failed request %s: %s", e.ID, e.Text)
}

// Is reports whether target is ErrRefused and the responder refused the
// request.
func (e *ResponderError) Is(target error) bool { return target == ErrRefused && e.Refused }

// errorKindRefused is HeaderErrorKind's value on a refusal's reply.
const errorKindRefused = "refused"
