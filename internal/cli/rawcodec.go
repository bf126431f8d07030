package cli

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/acemq/acemq"
)

// RawCodec passes bodies through untouched: the CLI sends the bytes it was
// given and prints the bytes it receives, whatever their format. It writes
// its content type and reads every content type.
type RawCodec struct{ Type string }

var _ acemq.Codec = RawCodec{}

// ContentType is the content type the codec labels bodies with.
func (c RawCodec) ContentType() string { return c.Type }

// Accepts reads any content type.
func (RawCodec) Accepts(string) bool { return true }

// Encode sends a []byte (or a string) as it is.
func (RawCodec) Encode(v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return x, nil
	case string:
		return []byte(x), nil
	case json.RawMessage:
		return x, nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("the raw codec sends []byte or string, not %T", v)
}

// Decode sets a *[]byte (or a *string) to the body as it is.
func (RawCodec) Decode(body []byte, _ string, v any) error {
	switch p := v.(type) {
	case *[]byte:
		*p = append((*p)[:0], body...)
		return nil
	case *string:
		*p = string(body)
		return nil
	case *json.RawMessage:
		*p = append((*p)[:0], body...)
		return nil
	}
	return &acemq.DecodeError{Err: fmt.Errorf("the raw codec reads into *[]byte or *string, not %T", v)}
}

// GuessContentType names a body given without --content-type: JSON when it
// parses as JSON, UTF-8 text when it is valid UTF-8, bytes otherwise.
func GuessContentType(body []byte) string {
	switch {
	case len(body) > 0 && json.Valid(body):
		return "application/json"
	case utf8.Valid(body):
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}
