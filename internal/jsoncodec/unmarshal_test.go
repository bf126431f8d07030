package jsoncodec

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

type inner struct {
	N int `json:"n"`
}

type Embedded struct {
	E string
}

type target struct {
	Embedded
	ID      string                 `json:"id"`
	Amount  int64                  `json:"amount"`
	Price   float64                `json:"price"`
	Items   []string               `json:"items"`
	Tags    map[string]string      `json:"tags"`
	Any     any                    `json:"any"`
	Num     json.Number            `json:"num"`
	NumPtr  *json.Number           `json:"numptr"`
	NumMap  map[string]json.Number `json:"nummap"`
	Raw     json.RawMessage        `json:"raw"`
	Quoted  int                    `json:"quoted,string"`
	At      time.Time              `json:"at"`
	Bytes   []byte                 `json:"bytes"`
	Ptr     *inner                 `json:"ptr"`
	Arr     [2]int                 `json:"arr"`
	Skip    string                 `json:"-"`
	Small   uint8                  `json:"small"`
	Untyped int
}

// bodies are what the decoders are compared on: well-formed bodies of every
// kind the target has, names in other letter cases, unknown fields,
// duplicates, invalid UTF-8, and malformed bodies.
var bodies = []string{
	`{"id":"o-1","amount":129900,"price":1.5,"items":["a","b"],"tags":{"k":"v"},"any":{"x":[1,"2",null,true]}}`,
	`{"ID":"upper","AMOUNT":3,"Items":null,"untyped":7,"e":"embedded"}`,
	`{"id":"a","id":"b","unknown":{"deep":[1,2,3]},"amount":1e3}`,
	`{"num":12.50,"raw":{"kept": [1, 2]},"quoted":"42","at":"2026-12-03T17:00:00.123Z","bytes":"aGVsbG8="}`,
	`{"ptr":{"n":5},"arr":[1,2,3],"small":255,"-":"no","Skip":"no"}`,
	`{"ptr":null,"items":[],"tags":null,"any":null}`,
	"{\"id\":\"bad \xff utf-8\",\"note\":\"\\ud800\"}",
	`{"id":"<html> & \u2028"}`,
	`{"amount":"not a number"}`,
	`{"small":256}`,
	`{"amount":1.5}`,
	`{"quoted":42}`,
	`{"num":"12"}`, `{"num":"12 "}`, `{"num":" 12"}`, `{"num":null}`, `{"num":"-"}`,
	`{"num":"x"}`, `{"numptr":"7","nummap":{"a":1,"b":"2.5"}}`, `{"nummap":{"a":true}}`,
	`{"at":"yesterday"}`,
	`{"bytes":"!!"}`,
	`{"id":1}`,
	`{"items":{"a":1}}`,
	`{"id":"o-1",}`,
	`{"id":"o-1"`,
	`{"id":"o-1"} trailing`,
	``,
	`null`,
	`[1,2]`,
	`"just a string"`,
	`{"arr":[1]}`,
	`{"id":"\u00e9\ud83d\ude00"}`,
	`  {"id" : "spaced" }  `,
}

// compare decodes body into a fresh T with encoding/json and with
// Unmarshal: the errors must be the same, and so must the values when
// there is none.
func compare[T any](t *testing.T, body []byte) {
	t.Helper()
	var want, got T
	wantErr := json.Unmarshal(body, &want)
	gotErr := unmarshal(body, &got)
	if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
		t.Fatalf("%q into %T: error %v, encoding/json's %v", body, got, gotErr, wantErr)
	}
	if wantErr != nil {
		if reflect.TypeOf(wantErr) != reflect.TypeOf(gotErr) {
			t.Fatalf("%q into %T: error of type %T, encoding/json's %T", body, got, gotErr, wantErr)
		}
		return
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%q into %T:\n got %#v\nwant %#v", body, got, got, want)
	}
}

func TestUnmarshalMatchesEncodingJSON(t *testing.T) {
	for _, b := range bodies {
		compare[target](t, []byte(b))
		compare[any](t, []byte(b))
		compare[map[string]any](t, []byte(b))
		compare[[]any](t, []byte(b))
		compare[string](t, []byte(b))
		compare[json.Number](t, []byte(b))
		compare[json.RawMessage](t, []byte(b))
		compare[map[string]json.Number](t, []byte(b))
	}
}

func TestUnmarshalReturnsEncodingJSONErrors(t *testing.T) {
	var v target
	err := unmarshal([]byte(`{"id":"o-1",}`), &v)
	if _, ok := err.(*json.SyntaxError); !ok {
		t.Errorf("a malformed body: %T %v, want a *json.SyntaxError", err, err)
	}
	err = unmarshal([]byte(`{"amount":"x"}`), &v)
	if e, ok := err.(*json.UnmarshalTypeError); !ok || !strings.Contains(e.Error(), "amount") {
		t.Errorf("a string for an int: %T %v, want a *json.UnmarshalTypeError naming the field", err, err)
	}
	err = unmarshal([]byte(`{}`), nil)
	if _, ok := err.(*json.InvalidUnmarshalError); !ok {
		t.Errorf("nil: %T %v, want a *json.InvalidUnmarshalError", err, err)
	}
	err = unmarshal([]byte(`{}`), v)
	if _, ok := err.(*json.InvalidUnmarshalError); !ok {
		t.Errorf("a non-pointer: %T %v, want a *json.InvalidUnmarshalError", err, err)
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, b := range bodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		compare[target](t, body)
		compare[any](t, body)
	})
}
