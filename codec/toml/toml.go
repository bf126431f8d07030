// Package toml is the TOML codec (docs/wire.md §4.4), on
// github.com/pelletier/go-toml/v2. It writes application/toml and reads
// application/toml, text/toml and *+toml; never a message without a
// content type, which is JSON's.
//
// Importing the package registers the codec as "toml" with package codec:
//
//	import _ "github.com/acemq/acemq/codec/toml"
//
// A TOML document is a table, so only a value that encodes as a table — a
// struct, a map with string keys, or a pointer to one — can be sent; a
// string, number or list on its own is refused, and a body is decoded only
// into such a value (or *any, which gets a map[string]any). Struct fields
// take `toml:"name"` tags. Other producers quote differently: compare
// decoded values, never bytes.
//
// A body over DefaultMaxBodySize bytes (WithMaxBodySize), or nesting tables
// and arrays over DefaultMaxDepth deep (WithMaxDepth; a dotted key nests a
// table per dot), is refused with an *acemq.LimitError before it is parsed.
// Reading costs up to about 320 bytes of allocation per body byte (dotted
// keys, each dot a table), so the size bound is what bounds a message's
// memory.
package toml

import (
	"fmt"
	"reflect"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/media"
	"github.com/acemq/acemq/internal/nesting"
	gotoml "github.com/pelletier/go-toml/v2"
)

// ContentType is what the codec writes.
const ContentType = "application/toml"

var (
	reads    = []string{ContentType, "text/toml"}
	suffixes = []string{"+toml"}
)

func init() { codec.Register("toml", New()) }

// The codec's bounds (WithMaxBodySize and WithMaxDepth change them).
const (
	// DefaultMaxBodySize is the largest body the codec reads: 512 KiB.
	DefaultMaxBodySize = 512 << 10
	// DefaultMaxDepth is how deeply tables and arrays may nest: 128.
	DefaultMaxDepth = 128
)

// Codec is the TOML codec. It implements acemq.Codec and is safe for
// concurrent use.
type Codec struct{ maxBody, maxDepth int }

// New returns the TOML codec, with the default bounds unless opts change
// them. It panics on a bound of zero or less: codecs are made at start-up,
// where a mistake should stop the program.
func New(opts ...Option) *Codec {
	c := &Codec{maxBody: DefaultMaxBodySize, maxDepth: DefaultMaxDepth}
	for _, o := range opts {
		o.apply(c)
	}
	if c.maxBody <= 0 || c.maxDepth <= 0 {
		panic(fmt.Sprintf("toml: New needs positive bounds, not a body size of %d and a depth of %d", c.maxBody, c.maxDepth))
	}
	return c
}

// An Option configures New. Every option is a function named With…, as
// across the module.
type Option interface{ apply(*Codec) }

type option func(*Codec)

func (f option) apply(c *Codec) { f(c) }

// WithMaxBodySize sets the largest body, in bytes, the codec reads
// (default DefaultMaxBodySize). New panics on n <= 0.
func WithMaxBodySize(n int) Option {
	return option(func(c *Codec) {
		c.maxBody = n
	})
}

// WithMaxDepth sets how deeply tables and arrays may nest (default
// DefaultMaxDepth). New panics on n <= 0.
func WithMaxDepth(n int) Option {
	return option(func(c *Codec) {
		c.maxDepth = n
	})
}

// ContentType is application/toml.
func (*Codec) ContentType() string { return ContentType }

// Accepts reports whether contentType is a TOML type; never for "".
func (*Codec) Accepts(contentType string) bool { return media.Matches(contentType, reads, suffixes) }

// isTable reports whether t encodes as a TOML table.
func isTable(t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return false
	}
	return t.Kind() == reflect.Struct || (t.Kind() == reflect.Map && t.Key().Kind() == reflect.String)
}

// Encode writes v, a struct or a string-keyed map, as a TOML document.
func (*Codec) Encode(v any) ([]byte, error) {
	if !isTable(reflect.TypeOf(v)) {
		return nil, fmt.Errorf("toml: a TOML document is a table: encode a struct or a map with string keys, not %T", v)
	}
	b, err := gotoml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("toml: encoding a %T: %w", v, err)
	}
	return b, nil
}

// Decode reads body, a TOML document, into v: a pointer to a struct or a
// string-keyed map, or *any. A malformed body, or one over the codec's
// bounds, is a non-retryable *acemq.DecodeError: the consumer parks it.
func (c *Codec) Decode(body []byte, contentType string, v any) error {
	if len(body) > c.maxBody {
		return &acemq.DecodeError{ContentType: contentType, Err: &acemq.LimitError{Codec: "toml", Size: len(body), Limit: c.maxBody}}
	}
	if nesting.TOML(body, c.maxDepth) {
		return &acemq.DecodeError{ContentType: contentType, Err: &acemq.LimitError{Codec: "toml", Depth: true, Size: len(body), Limit: c.maxDepth}}
	}
	if p, ok := v.(*any); ok {
		var m map[string]any
		if err := gotoml.Unmarshal(body, &m); err != nil {
			return &acemq.DecodeError{ContentType: contentType, Err: fmt.Errorf("not TOML: %w", err)}
		}
		*p = m
		return nil
	}
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || !isTable(t.Elem()) {
		return &acemq.DecodeError{ContentType: contentType, Err: fmt.Errorf("a TOML document is a table: decode into a pointer to a struct or a map with string keys, not %T", v)}
	}
	if err := gotoml.Unmarshal(body, v); err != nil {
		return &acemq.DecodeError{ContentType: contentType, Err: fmt.Errorf("not TOML for a %T: %w", v, err)}
	}
	return nil
}
