// Package jsoncodec is the module's one JSON codec. Package acemq's default
// codec (acemq.JSON) and the codecs package codec's JSON makes with other
// bounds are both a Codec; they differ only in their bounds and in the
// package whose errors they return, which Errors makes.
package jsoncodec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/acemq/acemq/internal/media"
	"github.com/acemq/acemq/internal/nesting"
)

// Errors makes the errors a Codec returns, as the package that offers it
// reports them: package acemq's *DecodeError and *LimitError, with its own
// prefix on Encode's errors.
type Errors interface {
	// Encode returns Encode's error for err, a fragment without a prefix.
	Encode(err error) error
	// Decode returns Decode's error for a body of contentType it does not
	// read: err is a malformed body's error, or one Limit made.
	Decode(contentType string, err error) error
	// Limit returns the error for a body of size bytes over a bound:
	// the nesting bound when depth is true, else the size bound.
	Limit(depth bool, size, limit int) error
}

// Codec is the JSON codec: application/json, encoding/json semantics, no
// trailing newline. It also reads text/json, application/*+json and a
// missing content type. It refuses a body over MaxBody bytes or nested
// more than MaxDepth deep before parsing it; a bound of zero or less is
// none. Codec is comparable, as codecs compared with == need.
type Codec struct {
	MaxBody, MaxDepth int
	Errors            Errors
}

// ContentType returns application/json.
func (Codec) ContentType() string { return "application/json" }

// Accepts reports whether ct is a JSON content type, or none.
func (Codec) Accepts(ct string) bool {
	if ct == "application/json" {
		return true // what every family publisher writes: no parsing
	}
	mt := media.Type(ct)
	return mt == "" || mt == "application/json" || mt == "text/json" ||
		(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// Encode writes v as JSON without escaping HTML and without a trailing
// newline; a json.RawMessage is written as it is once checked.
func (c Codec) Encode(v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return nil, c.Errors.Encode(errors.New("the JSON codec cannot encode a json.RawMessage that is not valid JSON"))
		}
		return raw, nil
	}
	jb := buffers.Get().(*buffer)
	jb.buf.Reset()
	if err := jb.enc.Encode(v); err != nil {
		buffers.Put(jb)
		return nil, c.Errors.Encode(fmt.Errorf("the JSON codec cannot encode a %T: %w", v, err))
	}
	b := jb.buf.Bytes()
	body := bytes.Clone(b[:len(b)-1]) // without Encode's newline
	if jb.buf.Cap() <= maxPooledBuffer {
		buffers.Put(jb)
	}
	return body, nil
}

// buffer is an encoder writing into its own buffer. Encode borrows one
// from buffers and copies the body out, so a body costs one allocation of
// its own size, as json.Marshal's does, without escaping HTML.
type buffer struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var buffers = sync.Pool{New: func() any {
	jb := new(buffer)
	jb.enc = json.NewEncoder(&jb.buf)
	jb.enc.SetEscapeHTML(false)
	return jb
}}

// maxPooledBuffer keeps the buffers of unusually large bodies out of the
// pool, so that one large message does not pin its memory.
const maxPooledBuffer = 64 << 10

// Decode reads body into the value v points to, refusing a body over a
// bound before it is parsed.
func (c Codec) Decode(body []byte, ct string, v any) error {
	if c.MaxBody > 0 && len(body) > c.MaxBody {
		return c.Errors.Decode(ct, c.Errors.Limit(false, len(body), c.MaxBody))
	}
	if c.MaxDepth > 0 && nesting.JSON(body, c.MaxDepth) {
		return c.Errors.Decode(ct, c.Errors.Limit(true, len(body), c.MaxDepth))
	}
	if err := unmarshal(body, v); err != nil {
		return c.Errors.Decode(ct, err)
	}
	return nil
}
