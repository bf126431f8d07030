package acemq

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/acemq/acemq/internal/jsoncodec"
	"github.com/acemq/acemq/internal/media"
)

// Codec turns payloads into bodies and back. A publisher writes one format;
// a consumer reads by content type, and a codec.Composite (package codec) reads several.
type Codec interface {
	// ContentType is written on every message the codec encodes.
	ContentType() string
	// Accepts reports whether the codec reads bodies of this content type
	// (as received, possibly with parameters, possibly empty).
	Accepts(contentType string) bool
	// Encode turns v into a body.
	Encode(v any) ([]byte, error)
	// Decode reads body into the value v points to. A failure should be a
	// *DecodeError saying whether retrying could help.
	Decode(body []byte, contentType string, v any) error
}

// DecodeError reports a body a codec could not read.
type DecodeError struct {
	ContentType string
	// Retryable is true when retrying could help (a claim-check store that
	// is down, say); a malformed body is not retryable and is parked.
	Retryable bool
	Err       error
}

// Error says that a body could not be decoded, its content type and why.
func (e *DecodeError) Error() string {
	ct := e.ContentType
	if ct == "" {
		ct = "no content type"
	}
	return fmt.Sprintf("could not decode a body (%s): %v", ct, e.Err)
}

// Unwrap returns the codec's error.
func (e *DecodeError) Unwrap() error { return e.Err }

// mediaType returns the lower-cased media type of a content type, without
// parameters. It is what mime.ParseMediaType returns as the media type,
// for valid and invalid input alike, without parsing the parameters: it
// runs on every delivery. The codecs under codec/ compare the same way.
func mediaType(ct string) string { return media.Type(ct) }

// JSON is the default codec: application/json, encoding/json semantics, no
// trailing newline. It also reads text/json, application/*+json and a
// missing content type. A malformed body is not retryable. It reads bodies
// of at most DefaultMaxBodySize bytes nested at most DefaultMaxDepth deep,
// refusing others with a *LimitError before parsing them; codec.JSON
// (package codec) makes one with other bounds.
var JSON Codec = jsoncodec.Codec{MaxBody: DefaultMaxBodySize, MaxDepth: DefaultMaxDepth, Errors: jsonErrors{}}

// jsonErrors makes the JSON codec's errors this package's.
type jsonErrors struct{}

func (jsonErrors) Encode(err error) error { return fmt.Errorf("acemq: %w", err) }

func (jsonErrors) Decode(ct string, err error) error { return &DecodeError{ContentType: ct, Err: err} }

func (jsonErrors) Limit(depth bool, size, limit int) error {
	return &LimitError{Codec: "json", Depth: depth, Size: size, Limit: limit}
}

// Text is the text/plain; charset=utf-8 codec. It encodes strings, []byte
// and fmt.Stringer values, decodes into *string or *[]byte, reads any text/*
// content type and refuses invalid UTF-8 either way.
var Text Codec = textCodec{}

type textCodec struct{}

func (textCodec) ContentType() string { return "text/plain; charset=utf-8" }

func (textCodec) Accepts(ct string) bool { return strings.HasPrefix(mediaType(ct), "text/") }

func (textCodec) Encode(v any) ([]byte, error) {
	var b []byte
	switch s := v.(type) {
	case string:
		b = []byte(s)
	case []byte:
		b = s
	case fmt.Stringer:
		b = []byte(s.String())
	default:
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.String {
			return nil, fmt.Errorf("acemq: the text codec encodes strings, not %T", v)
		}
		b = []byte(rv.String())
	}
	if !utf8.Valid(b) {
		return nil, errors.New("acemq: the text codec refuses invalid UTF-8")
	}
	return b, nil
}

func (textCodec) Decode(body []byte, ct string, v any) error {
	if !utf8.Valid(body) {
		return &DecodeError{ContentType: ct, Err: errors.New("the body is not valid UTF-8")}
	}
	switch p := v.(type) {
	case *string:
		*p = string(body)
	case *[]byte:
		*p = append((*p)[:0], body...)
	case *any:
		*p = string(body)
	default:
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Pointer && rv.Elem().Kind() == reflect.String {
			rv.Elem().SetString(string(body))
			return nil
		}
		return &DecodeError{ContentType: ct, Err: fmt.Errorf("the text codec decodes into *string, not %T", v)}
	}
	return nil
}

// Bytes is the application/octet-stream codec: the body is the payload. It
// encodes []byte and string, decodes into *[]byte (or *string), and reads
// every content type, so it must be chosen explicitly.
var Bytes Codec = bytesCodec{}

type bytesCodec struct{}

func (bytesCodec) ContentType() string { return "application/octet-stream" }

func (bytesCodec) Accepts(string) bool { return true }

func (bytesCodec) Encode(v any) ([]byte, error) {
	switch b := v.(type) {
	case []byte:
		return b, nil
	case string:
		return []byte(b), nil
	case json.RawMessage:
		return b, nil
	}
	return nil, fmt.Errorf("acemq: the bytes codec encodes []byte, not %T", v)
}

func (bytesCodec) Decode(body []byte, ct string, v any) error {
	switch p := v.(type) {
	case *[]byte:
		*p = append([]byte(nil), body...)
	case *string:
		*p = string(body)
	case *json.RawMessage:
		*p = append((*p)[:0], body...)
	case *any:
		*p = append([]byte(nil), body...)
	default:
		return &DecodeError{ContentType: ct, Err: fmt.Errorf("the bytes codec decodes into *[]byte, not %T", v)}
	}
	return nil
}

// decode runs codec.Decode, refusing a content type the codec does not
// accept, and makes every failure a *DecodeError.
func decode(c Codec, body []byte, ct string, v any) error {
	if !c.Accepts(ct) {
		return &DecodeError{ContentType: ct, Err: fmt.Errorf("the %s codec does not read content type %q", c.ContentType(), ct)}
	}
	err := c.Decode(body, ct, v)
	if err == nil {
		return nil
	}
	var de *DecodeError
	if errors.As(err, &de) {
		return err
	}
	return &DecodeError{ContentType: ct, Err: err}
}
