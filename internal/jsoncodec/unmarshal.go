package jsoncodec

import (
	"encoding/json"
	"errors"
	"reflect"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// v1 is encoding/json's semantics; withNumber adds its json.Number, for
// the types that hold one (looking the unmarshaler up costs every value
// of every other type too).
var (
	v1         = jsonv1.DefaultOptionsV1()
	withNumber = jsonv2.JoinOptions(v1, jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(readNumber)))
)

// numberTypes caches holdsNumber by the type decoded into.
var numberTypes sync.Map // reflect.Type → bool

var numberType = reflect.TypeFor[json.Number]()

// holdsNumber reports whether a value of type t can hold a json.Number:
// t is one, or a pointer, slice, array or map of one, or a struct with a
// field that can hold one. seen breaks cycles.
func holdsNumber(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == numberType {
		return true
	}
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsNumber(t.Elem(), seen)
	case reflect.Map:
		return holdsNumber(t.Key(), seen) || holdsNumber(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsNumber(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// optionsFor returns the options to decode into a value of type t.
func optionsFor(t reflect.Type) jsonv2.Options {
	if t == nil {
		return v1 // Unmarshal(data, nil) fails whatever the options
	}
	number, ok := numberTypes.Load(t)
	if !ok {
		number, _ = numberTypes.LoadOrStore(t, holdsNumber(t, map[reflect.Type]bool{}))
	}
	if number.(bool) {
		return withNumber
	}
	return v1
}

// errNotNumber sends a json.Number that encoding/json would refuse to
// encoding/json, for its error.
var errNotNumber = errors.New("jsoncodec: not a number")

// readNumber reads a json.Number as encoding/json does: a number as it is
// written, a string holding a valid number literal, or null (no change).
// json v2 knows only its own Number type, and would read encoding/json's
// as a plain string.
func readNumber(dec *jsontext.Decoder, n *json.Number) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	switch v.Kind() {
	case '0':
		*n = json.Number(v)
		return nil
	case 'n':
		return nil
	case '"':
		var s string
		if err := jsonv2.Unmarshal(v, &s); err != nil {
			return err
		}
		if s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9') && s[len(s)-1] >= '0' && s[len(s)-1] <= '9' && json.Valid([]byte(s)) {
			*n = json.Number(s)
			return nil
		}
	}
	return errNotNumber
}

// unmarshal decodes data into v as encoding/json's Unmarshal does, at
// about half its cost.
//
// unmarshal parses with github.com/go-json-experiment/json (the Go team's
// json v2) in its encoding/json-compatible mode: field names matched
// without regard to letter case, unknown fields ignored, duplicate names
// and invalid UTF-8 accepted as encoding/json accepts them, the last of
// duplicate names winning, numbers into an interface as float64, and
// encoding/json's json.Number read as encoding/json reads it. Whenever that
// fails, the body is decoded again with encoding/json and its result and
// error are the ones returned: a malformed body or a value of the wrong
// type fails with encoding/json's own error types and messages
// (*json.SyntaxError, *json.UnmarshalTypeError…), and a body the two
// decoders would disagree on by failing is decided by encoding/json.
//
// One difference remains, on failure only: encoding/json leaves the target
// untouched when the body is malformed, and unmarshal may have filled part
// of it by then (both fill part of it when a value has the wrong type).
func unmarshal(data []byte, v any) error {
	if jsonv2.Unmarshal(data, v, optionsFor(reflect.TypeOf(v))) == nil {
		return nil
	}
	return json.Unmarshal(data, v)
}
