package acemq_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/allocbound"
	"github.com/acemq/acemq/internal/headerjson"
)

// A body over the JSON codec's bounds is refused before encoding/json reads
// it, with a non-retryable *DecodeError whose message names the bound and
// which errors.Is finds as ErrTooLarge or ErrTooDeep.
func TestJSONLimits(t *testing.T) {
	var v any
	big := []byte(`"` + strings.Repeat("a", acemq.DefaultMaxBodySize-2) + `"`)
	if err := acemq.JSON.Decode(big, "application/json", &v); err != nil {
		t.Fatalf("a body of exactly the limit: %v", err)
	}
	big = append(big, ' ')
	err := acemq.JSON.Decode(big, "application/json", &v)
	var de *acemq.DecodeError
	if !errors.As(err, &de) || de.Retryable || !errors.Is(err, acemq.ErrTooLarge) ||
		!strings.Contains(err.Error(), "body of 4194305 bytes exceeds the json codec's limit of 4194304") {
		t.Fatalf("over the size limit: %v", err)
	}

	deep := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	if err := acemq.JSON.Decode(deep(acemq.DefaultMaxDepth), "application/json", &v); err != nil {
		t.Fatalf("nested exactly the limit: %v", err)
	}
	err = acemq.JSON.Decode(deep(acemq.DefaultMaxDepth+1), "application/json", &v)
	if !errors.As(err, &de) || de.Retryable || !errors.Is(err, acemq.ErrTooDeep) || errors.Is(err, acemq.ErrTooLarge) ||
		!strings.Contains(err.Error(), "body nests deeper than the json codec's limit of 128 levels") {
		t.Fatalf("over the depth limit: %v", err)
	}
	// Brackets in strings are text, escaped quotes included.
	quoted := []byte(`{"a":"` + strings.Repeat(`[{\"`, 500) + `"}`)
	if err := acemq.JSON.Decode(quoted, "application/json", &v); err != nil {
		t.Fatalf("brackets in a string: %v", err)
	}
}

// HeadersFromJSON (and so Envelope.UnmarshalJSON) rendered the path of every
// value as it went, so nested arrays cost the square of their depth: 18 KB
// allocated 130 MB. Now a path is rendered only for an error, and nesting
// beyond 64 is refused before parsing.
func TestHeadersFromJSONMemoryIsLinear(t *testing.T) {
	deep := `{"h":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`
	var err error
	n := allocbound.Bytes(func() { _, err = headerjson.HeadersFromJSON([]byte(deep)) })
	if !errors.Is(err, acemq.ErrTooDeep) || !strings.Contains(err.Error(), "more than 64 levels") {
		t.Fatalf("18 KB of nested arrays: %v", err)
	}
	if n > 64<<10 {
		t.Errorf("refusing %d bytes of nested arrays allocated %d bytes", len(deep), n)
	}
	// encoding/json checks the whole input before UnmarshalJSON sees it,
	// its scanner's stack growing with the depth: linear, about 16 bytes
	// per byte here.
	var e acemq.Envelope
	n = allocbound.Bytes(func() { err = json.Unmarshal([]byte(`{"headers":`+deep+`}`), &e) })
	if !errors.Is(err, acemq.ErrTooDeep) || n > 32*uint64(len(deep)) {
		t.Errorf("UnmarshalJSON of nested headers: %d bytes allocated, %v", n, err)
	}

	// Within the depth bound, long keys on the way to many leaves: each
	// leaf's path is 62 keys of 1 KiB, rendered for every leaf before.
	var b strings.Builder
	key := strings.Repeat("k", 1024)
	b.WriteString("{")
	for range 62 {
		b.WriteString(`"` + key + `":{`)
	}
	for i := range 2000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"x` + strconv.Itoa(i) + `":1`)
	}
	b.WriteString(strings.Repeat("}", 63))
	wide := b.String()
	var h map[string]any
	n = allocbound.Bytes(func() { h, err = headerjson.HeadersFromJSON([]byte(wide)) })
	if err != nil || len(h) != 1 {
		t.Fatalf("long keys: %v", err)
	}
	if n > 40*uint64(len(wide))+64<<10 {
		t.Errorf("a %d-byte header object with long keys allocated %d bytes", len(wide), n)
	}
	t.Logf("%d bytes: %d allocated", len(wide), n)
}

// FuzzJSONDecode: the JSON codec never allocates more than
// jsonBytesPerByte per body byte (plus a constant), whatever the body.
func FuzzJSONDecode(f *testing.F) {
	for _, s := range []string{
		`{"id":"o-1","qty":2,"items":["a","b"]}`, `[[[[[[[[]]]]]]]]`, `{"a":{"a":{"a":{}}}}`,
		strings.Repeat("[", 129) + strings.Repeat("]", 129), `"\"[[[["`, `[[],[],[],[],[],[]]`, `[0,0,0,0,0,0,0,0]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v any
		allocbound.Check(t, len(body), jsonBytesPerByte, 16<<10, func() { _ = acemq.JSON.Decode(body, "application/json", &v) })
	})
}

// jsonBytesPerByte bounds what the JSON codec allocates per body byte,
// decoding into any (docs/codecs.md): measured worst, [[],[],…] and
// [0,0,…], 37 and 43.
const jsonBytesPerByte = 64
