package rabbitmq

import (
	"errors"
	"fmt"

	"github.com/acemq/acemq/internal/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrUnsendable is wrapped by a publish the driver refuses before sending
// anything, because the message cannot cross AMQP 0-9-1 intact and sending
// it would close a connection: a property or header name longer than 255
// bytes, properties and headers larger than one frame (the broker's
// frame_max, 128 KiB by default), a NaN or infinite float (RabbitMQ answers
// INTERNAL_ERROR), or nesting deeper than 32 levels or a table or array of
// more than 8192 entries (amqp091 closes the connection of every consumer
// that receives one, on every redelivery).
var ErrUnsendable = errors.New("the message cannot be sent over AMQP 0-9-1")

// Limits of amqp091's reader (read.go): deeper or wider values make it
// close the connection.
const (
	maxFieldDepth        = 32
	maxContainerElements = 8192
	frameOverhead        = 8 // frame type, channel, size and end octet
)

// checkSendable returns an error wrapping ErrUnsendable when pub cannot be
// sent on a connection whose negotiated frame size is frameMax (0: no
// limit). It walks the headers once and allocates nothing when they pass.
func checkSendable(pub *amqp.Publishing, frameMax int) error {
	return checkSendableSized(pub, frameMax, -1)
}

// checkSendableSized is checkSendable for headers whose encoded size is
// known (flatTable), or -1 to walk them.
func checkSendableSized(pub *amqp.Publishing, frameMax, headerSize int) error {
	// Content header payload: class, weight, body size, property flags.
	size := 2 + 2 + 8 + 2
	// The short-string properties, read in place: each set one takes a
	// length octet and its bytes.
	size += shortString(pub.ContentType) + shortString(pub.ContentEncoding) +
		shortString(pub.CorrelationId) + shortString(pub.ReplyTo) +
		shortString(pub.Expiration) + shortString(pub.MessageId) +
		shortString(pub.Type) + shortString(pub.UserId) + shortString(pub.AppId)
	if max(len(pub.ContentType), len(pub.ContentEncoding), len(pub.CorrelationId), len(pub.ReplyTo),
		len(pub.Expiration), len(pub.MessageId), len(pub.Type), len(pub.UserId), len(pub.AppId)) > 255 {
		return longProperty(pub)
	}
	if pub.DeliveryMode > 0 {
		size++
	}
	if pub.Priority > 0 {
		size++
	}
	if !pub.Timestamp.IsZero() {
		size += 8
	}
	if len(pub.Headers) > 0 && headerSize >= 0 {
		size += headerSize
	} else if len(pub.Headers) > 0 {
		n, err := tableSize(pub.Headers, 0)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnsendable, err)
		}
		size += n
	}
	if frameMax > 0 && size > frameMax-frameOverhead {
		return fmt.Errorf("%w: its properties and headers take %d bytes and the broker's frame size allows %d; move large values into the body", ErrUnsendable, size, frameMax-frameOverhead)
	}
	return nil
}

// shortString is the encoded size of a short-string property: nothing
// when it is empty (its flag is off).
func shortString(v string) int {
	if v == "" {
		return 0
	}
	return 1 + len(v)
}

// longProperty is the error of a publish with a property longer than a
// short string holds.
func longProperty(pub *amqp.Publishing) error {
	props := [...]string{pub.ContentType, pub.ContentEncoding, pub.CorrelationId, pub.ReplyTo,
		pub.Expiration, pub.MessageId, pub.Type, pub.UserId, pub.AppId}
	names := [...]string{"content-type", "content-encoding", "correlation-id", "reply-to",
		"expiration", "message-id", "type", "user-id", "app-id"}
	for i, v := range props {
		if len(v) > 255 {
			return fmt.Errorf("%w: its %s is %d bytes long; AMQP allows 255", ErrUnsendable, names[i], len(v))
		}
	}
	return nil
}

// tableSize is the encoded size of a field table (with its length prefix).
func tableSize(t amqp.Table, depth int) (int, error) {
	if depth > maxFieldDepth {
		return 0, fmt.Errorf("its headers nest deeper than %d levels", maxFieldDepth)
	}
	if len(t) > maxContainerElements {
		return 0, fmt.Errorf("a table in its headers has %d entries; at most %d can be read back", len(t), maxContainerElements)
	}
	n := 4
	for k, v := range t {
		if len(k) > 255 {
			return 0, fmt.Errorf("the header name %.40q… is %d bytes long; AMQP allows 255", k, len(k))
		}
		f, err := fieldSize(v, depth)
		if err != nil {
			if depth == 0 {
				err = fmt.Errorf("header %.60q: %w", k, err)
			}
			return 0, err
		}
		n += 1 + len(k) + f
	}
	return n, nil
}

// fieldSize is the encoded size of a field value, its type octet included.
// Values amqp091 cannot encode were refused earlier (toAMQPTable). Scalars
// are counted by wire.ScalarSize, as the publishers count them.
func fieldSize(v any, depth int) (int, error) {
	if n, ok := wire.ScalarSize(v); ok {
		return n, nil
	}
	switch x := v.(type) {
	case float32, float64: // ScalarSize refuses only NaN and the infinities
		return 0, fmt.Errorf("the float %v cannot be carried by RabbitMQ", x)
	case int:
		return 5, nil
	case amqp.Decimal:
		return 6, nil
	case amqp.Table:
		n, err := tableSize(x, depth+1)
		return 1 + n, err
	case map[string]any:
		n, err := tableSize(amqp.Table(x), depth+1)
		return 1 + n, err
	case []any:
		if depth+1 > maxFieldDepth {
			return 0, fmt.Errorf("its headers nest deeper than %d levels", maxFieldDepth)
		}
		if len(x) > maxContainerElements {
			return 0, fmt.Errorf("an array in its headers has %d elements; at most %d can be read back", len(x), maxContainerElements)
		}
		n := 5
		for _, e := range x {
			f, err := fieldSize(e, depth+1)
			if err != nil {
				return 0, err
			}
			n += f
		}
		return n, nil
	}
	return 0, nil
}
