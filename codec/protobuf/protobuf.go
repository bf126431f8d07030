// Package protobuf is the Protocol Buffers codec (docs/wire.md §4.4), on
// google.golang.org/protobuf. It writes application/x-protobuf and reads
// application/x-protobuf, application/protobuf,
// application/vnd.google.protobuf and *+protobuf; never a message without a
// content type, which is JSON's.
//
// A protobuf body does not say what message it holds, so a codec is made
// for one message type, given by an example value, and refuses any other:
//
//	orders := protobuf.New(&orderpb.Order{})
//	pub := acemq.NewPublisher[*orderpb.Order](conn, "orders", acemq.WithCodec(orders))
//	codec.Register("orders-protobuf", orders) // to name it in configuration
//
// Decoding accepts a *M (filled in place) or a **M, *proto.Message or
// *any (given a new M), where M is the codec's message type. Unknown fields
// are kept, as the protobuf library does, so a consumer on an older schema
// passes them on.
//
// A body over DefaultMaxBodySize bytes (WithMaxBodySize) is refused before
// it is parsed, and messages nested over DefaultMaxDepth deep
// (WithMaxDepth, the protobuf library's own recursion limit, 10,000 by
// default there) as they are parsed, with an *acemq.LimitError.
package protobuf

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/media"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ContentType is what the codec writes.
const ContentType = "application/x-protobuf"

var (
	reads    = []string{ContentType, "application/protobuf", "application/vnd.google.protobuf"}
	suffixes = []string{"+protobuf"}
)

// The codec's bounds (WithMaxBodySize and WithMaxDepth change them).
const (
	// DefaultMaxBodySize is the largest body the codec reads: 4 MiB.
	DefaultMaxBodySize = 4 << 20
	// DefaultMaxDepth is how deeply messages may nest: 100.
	DefaultMaxDepth = 100
)

// Codec is the codec of one protobuf message type. It implements
// acemq.Codec and is safe for concurrent use.
type Codec struct {
	typ     protoreflect.MessageType
	name    protoreflect.FullName
	maxBody int
	opts    proto.UnmarshalOptions
}

// New returns the codec of example's message type (example's contents do
// not matter), with the default bounds unless opts change them. It panics
// on a nil example or a bound of zero or less: the type is fixed at
// start-up, where a mistake should stop the program.
func New(example proto.Message, opts ...Option) *Codec {
	if example == nil {
		panic("protobuf: New needs an example message, for example &orderpb.Order{}")
	}
	t := example.ProtoReflect().Type()
	c := &Codec{typ: t, name: t.Descriptor().FullName(), maxBody: DefaultMaxBodySize, opts: proto.UnmarshalOptions{RecursionLimit: DefaultMaxDepth}}
	for _, o := range opts {
		o.apply(c)
	}
	if c.maxBody <= 0 || c.opts.RecursionLimit <= 0 {
		panic(fmt.Sprintf("protobuf: New needs positive bounds, not a body size of %d and a depth of %d", c.maxBody, c.opts.RecursionLimit))
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

// WithMaxDepth sets how deeply messages may nest (default
// DefaultMaxDepth). New panics on n <= 0.
func WithMaxDepth(n int) Option {
	return option(func(c *Codec) {
		c.opts.RecursionLimit = n
	})
}

// MessageName is the full name of the codec's message type.
func (c *Codec) MessageName() string { return string(c.name) }

// ContentType is application/x-protobuf.
func (*Codec) ContentType() string { return ContentType }

// Accepts reports whether contentType is a protobuf type; never for "".
func (*Codec) Accepts(contentType string) bool { return media.Matches(contentType, reads, suffixes) }

// Encode writes v, a message of the codec's type, in the binary wire
// format.
func (c *Codec) Encode(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("protobuf: the %s codec encodes that message, not %T", c.name, v)
	}
	if got := m.ProtoReflect().Descriptor().FullName(); got != c.name {
		return nil, fmt.Errorf("protobuf: the %s codec encodes that message, not %s", c.name, got)
	}
	return proto.Marshal(m)
}

// Decode reads body into v (see the package documentation for the
// targets). A malformed body, one over the codec's bounds or a target of
// another type is a non-retryable *acemq.DecodeError: the consumer parks
// it.
func (c *Codec) Decode(body []byte, contentType string, v any) error {
	if len(body) > c.maxBody {
		return &acemq.DecodeError{ContentType: contentType, Err: &acemq.LimitError{Codec: "protobuf", Size: len(body), Limit: c.maxBody}}
	}
	m, set, err := c.target(v)
	if err != nil {
		return &acemq.DecodeError{ContentType: contentType, Err: err}
	}
	if err := c.opts.Unmarshal(body, m); err != nil {
		// The library's error for its recursion limit is not exported.
		if strings.Contains(err.Error(), "exceeded maximum recursion depth") {
			return &acemq.DecodeError{ContentType: contentType, Err: &acemq.LimitError{Codec: "protobuf", Depth: true, Size: len(body), Limit: c.opts.RecursionLimit}}
		}
		return &acemq.DecodeError{ContentType: contentType, Err: fmt.Errorf("not a protobuf %s: %w", c.name, err)}
	}
	if set != nil {
		set(m)
	}
	return nil
}

// target returns the message to unmarshal into and, when v points to a
// variable to be given a new message, how to set it.
func (c *Codec) target(v any) (proto.Message, func(proto.Message), error) {
	switch p := v.(type) {
	case proto.Message:
		if got := p.ProtoReflect().Descriptor().FullName(); got != c.name {
			return nil, nil, fmt.Errorf("the %s codec decodes that message, not %s", c.name, got)
		}
		if !p.ProtoReflect().IsValid() {
			return nil, nil, fmt.Errorf("the %s codec cannot decode into a nil %T", c.name, v)
		}
		return p, nil, nil
	case *proto.Message:
		return c.typ.New().Interface(), func(m proto.Message) { *p = m }, nil
	case *any:
		return c.typ.New().Interface(), func(m proto.Message) { *p = m }, nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		m := c.typ.New().Interface()
		if rv.Elem().Type() == reflect.TypeOf(m) {
			return m, func(m proto.Message) { rv.Elem().Set(reflect.ValueOf(m)) }, nil
		}
	}
	return nil, nil, errors.New("the " + string(c.name) + " codec decodes into that message type, not " + fmt.Sprintf("%T", v))
}
