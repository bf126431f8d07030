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
package protobuf

import (
	"errors"
	"fmt"
	"reflect"

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

// Codec is the codec of one protobuf message type. It implements
// acemq.Codec and is safe for concurrent use.
type Codec struct {
	typ  protoreflect.MessageType
	name protoreflect.FullName
}

// New returns the codec of example's message type (example's contents do
// not matter). It panics on a nil example: the type is fixed at start-up.
func New(example proto.Message) *Codec {
	if example == nil {
		panic("protobuf: New needs an example message, for example &orderpb.Order{}")
	}
	t := example.ProtoReflect().Type()
	return &Codec{typ: t, name: t.Descriptor().FullName()}
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
// targets). A malformed body or a target of another type is a
// non-retryable *acemq.DecodeError: the consumer parks it.
func (c *Codec) Decode(body []byte, contentType string, v any) error {
	m, set, err := c.target(v)
	if err != nil {
		return &acemq.DecodeError{ContentType: contentType, Err: err}
	}
	if err := proto.Unmarshal(body, m); err != nil {
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
