package codec

import (
	"fmt"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/jsoncodec"
)

// A JSONOption configures JSON.
type JSONOption interface{ applyJSON(*jsoncodec.Codec) }

type jsonOption func(*jsoncodec.Codec)

func (f jsonOption) applyJSON(c *jsoncodec.Codec) { f(c) }

// WithMaxBodySize sets the largest body, in bytes, the JSON codec made by
// JSON reads (default acemq.DefaultMaxBodySize). A larger body is refused
// with an *acemq.LimitError wrapping acemq.ErrTooLarge before it is
// parsed. JSON panics on n <= 0.
func WithMaxBodySize(n int) JSONOption {
	return jsonOption(func(c *jsoncodec.Codec) {
		c.MaxBody = n
	})
}

// WithMaxDepth sets how deeply the JSON codec made by JSON lets arrays and
// objects nest (default acemq.DefaultMaxDepth). A deeper body is refused
// with an *acemq.LimitError wrapping acemq.ErrTooDeep before it is parsed.
// JSON panics on n <= 0.
func WithMaxDepth(n int) JSONOption {
	return jsonOption(func(c *jsoncodec.Codec) {
		c.MaxDepth = n
	})
}

// JSON returns the JSON codec with other bounds than acemq.JSON's: a
// largest body (WithMaxBodySize) and a deepest nesting (WithMaxDepth). It
// writes and reads what acemq.JSON does, and its errors are the same
// *acemq.DecodeError and *acemq.LimitError. It panics on a bound of zero
// or less: codecs are made at start-up, where a mistake should stop the
// program.
func JSON(opts ...JSONOption) acemq.Codec {
	c := jsoncodec.Codec{MaxBody: acemq.DefaultMaxBodySize, MaxDepth: acemq.DefaultMaxDepth, Errors: jsonErrors{}}
	for _, o := range opts {
		o.applyJSON(&c)
	}
	if c.MaxBody <= 0 || c.MaxDepth <= 0 {
		panic(fmt.Sprintf("codec: JSON needs positive bounds, not a body size of %d and a depth of %d", c.MaxBody, c.MaxDepth))
	}
	return c
}

// jsonErrors makes the JSON codec's errors: acemq's types, this package's
// prefix.
type jsonErrors struct{}

func (jsonErrors) Encode(err error) error { return fmt.Errorf("codec: %w", err) }

func (jsonErrors) Decode(ct string, err error) error {
	return &acemq.DecodeError{ContentType: ct, Err: err}
}

func (jsonErrors) Limit(depth bool, size, limit int) error {
	return &acemq.LimitError{Codec: "json", Depth: depth, Size: size, Limit: limit}
}
