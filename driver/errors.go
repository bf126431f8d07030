package driver

import (
	"errors"
	"fmt"
)

// Errors a driver reports. Drivers wrap them with detail; callers test with
// errors.Is.
var (
	// ErrNotFound: a passive declaration named something that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrNacked: the broker refused (nacked) a publish.
	ErrNacked = errors.New("the broker refused the publish (nack)")
	// ErrLost: the channel or connection died before the publish was
	// confirmed. The message may or may not have reached a queue.
	ErrLost = errors.New("the connection was lost before the broker confirmed the publish; it may or may not have been delivered")
	// ErrBlocked: the broker has blocked publishing (a resource alarm).
	ErrBlocked = errors.New("the broker has blocked this connection; publishing is paused")
	// ErrConfirmTimeout: no confirm, or no permit to publish, arrived in time.
	ErrConfirmTimeout = errors.New("timed out waiting for a publisher confirm")
	// ErrClosed: the connection was closed by the application.
	ErrClosed = errors.New("the connection is closed")
	// ErrChannelClosed: the channel a delivery came on is gone.
	ErrChannelClosed = errors.New("the channel is closed")
	// ErrNotSettleable: a delivery with no acknowledger.
	ErrNotSettleable = errors.New("the delivery cannot be settled")
)

// ReturnError reports a mandatory publish that the broker could not route.
type ReturnError struct {
	Exchange   string
	RoutingKey string
	Code       int    // 312 for NO_ROUTE
	Text       string // "NO_ROUTE"
}

// Error says that the message was unroutable, with the broker's code and
// text and where it was published.
func (e *ReturnError) Error() string {
	return fmt.Sprintf("the message was unroutable: %d %s (exchange %q, routing key %q)", e.Code, e.Text, e.Exchange, e.RoutingKey)
}

// PreconditionError reports a declaration that conflicts with what the
// broker already has (PRECONDITION_FAILED, 406).
type PreconditionError struct {
	// Kind is "queue" or "exchange".
	Kind string
	Name string
	// Detail is the broker's text, naming the differing argument.
	Detail string
}

// Error names what exists with different settings and the broker's text.
func (e *PreconditionError) Error() string {
	return fmt.Sprintf("the %s %q exists with different settings: %s", e.Kind, e.Name, e.Detail)
}

// AccessError reports a declaration refused for exclusivity or permissions
// (RESOURCE_LOCKED 405, ACCESS_REFUSED 403).
type AccessError struct {
	Code int
	Text string
}

// Error is the broker's refusal, code and text.
func (e *AccessError) Error() string {
	return fmt.Sprintf("the broker refused access: %d %s", e.Code, e.Text)
}

// ErrPermanent is matched (with errors.Is) by an error of Driver.Open that
// no retry can fix: credentials or a virtual host the broker refuses, a URL
// or configuration the driver cannot use, a certificate that does not
// verify. Package acemq's WithWaitForBroker stops at such an error instead
// of dialling again. Drivers mark these errors with Permanent.
var ErrPermanent = errors.New("retrying cannot fix this")

// Permanent marks err as one that retrying cannot fix: errors.Is(e,
// ErrPermanent) is true of the result, whose text is err's and which
// unwraps to err. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

type permanentError struct{ err error }

func (e permanentError) Error() string        { return e.err.Error() }
func (e permanentError) Unwrap() error        { return e.err }
func (e permanentError) Is(target error) bool { return target == ErrPermanent }
