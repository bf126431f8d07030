package acemq

import (
	"errors"
	"fmt"

	"github.com/acemq/acemq/internal/nesting"
)

// ErrTooLarge is wrapped by the error a codec returns for a body larger
// than it reads (its maximum body size). Every codec of the module checks
// the size before parsing anything; errors.Is(err, ErrTooLarge) finds it
// through the *DecodeError.
var ErrTooLarge = errors.New("too large")

// ErrTooDeep is wrapped by the error a codec returns for a body that nests
// values deeper than it reads (its maximum depth), found before the body
// reaches a parser whose cost grows with depth.
var ErrTooDeep = nesting.ErrTooDeep

// LimitError reports a body a codec refused for exceeding one of its
// bounds. Its Error names the bound, which is what an operator reads in a
// parked message's x-acemq-error. It wraps ErrTooLarge or ErrTooDeep, and
// codecs return it inside a non-retryable *DecodeError.
type LimitError struct {
	// Codec names the codec: "json", "yaml", "xml" and so on.
	Codec string
	// Depth is true for the nesting bound, false for the size bound.
	Depth bool
	// Size is the body's length in bytes.
	Size int
	// Limit is the bound: bytes, or levels of nesting.
	Limit int
}

// Error names the bound, for example "body of 300000 bytes exceeds the yaml
// codec's limit of 262144" or "body nests deeper than the yaml codec's
// limit of 64 levels".
func (e *LimitError) Error() string {
	if e.Depth {
		return fmt.Sprintf("body nests deeper than the %s codec's limit of %d levels", e.Codec, e.Limit)
	}
	return fmt.Sprintf("body of %d bytes exceeds the %s codec's limit of %d", e.Size, e.Codec, e.Limit)
}

// Unwrap returns ErrTooDeep or ErrTooLarge.
func (e *LimitError) Unwrap() error {
	if e.Depth {
		return ErrTooDeep
	}
	return ErrTooLarge
}

// The JSON codec's bounds (codec.JSON, in package codec, makes one with
// others).
const (
	// DefaultMaxBodySize is the largest body JSON reads: 4 MiB.
	DefaultMaxBodySize = 4 << 20
	// DefaultMaxDepth is how deeply JSON lets arrays and objects nest: 128.
	DefaultMaxDepth = 128
)
