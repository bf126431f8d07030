package avro_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec/avro"
	"github.com/acemq/acemq/internal/allocbound"
	"github.com/acemq/acemq/internal/testenv"
)

type resolutionCase struct {
	Case         string         `json:"case"`
	SchemaID     uint32         `json:"schemaId"`
	WriterSchema string         `json:"writerSchema"`
	ReaderSchema string         `json:"readerSchema"`
	BodyBase64   string         `json:"bodyBase64"`
	Resolved     map[string]any `json:"resolved"`
	WriterShape  map[string]any `json:"writerShape"`
}

func loadCases(t *testing.T) []resolutionCase {
	t.Helper()
	raw, err := os.ReadFile(testenv.ContractFile(t, "avro-resolution-fixtures.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Cases []resolutionCase }
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) != 2 {
		t.Fatalf("the fixture has %d cases, want 2", len(f.Cases))
	}
	return f.Cases
}

// same compares a decoded record with the fixture's JSON, as JSON.
func same(t *testing.T, what string, got any, want map[string]any) {
	t.Helper()
	g, _ := json.Marshal(got)
	var back map[string]any
	_ = json.Unmarshal(g, &back)
	if !reflect.DeepEqual(back, want) {
		t.Errorf("%s: got %s, want %v", what, g, want)
	}
}

// Both columns of the family's resolution cases: resolved, with the reader
// schema (the default), and the writer's shape.
func TestResolutionFixtures(t *testing.T) {
	ctx := context.Background()
	for _, tc := range loadCases(t) {
		t.Run(tc.Case, func(t *testing.T) {
			reg := avro.NewRegistry(avro.NewMemoryStore())
			if err := reg.Put(ctx, tc.SchemaID, tc.WriterSchema); err != nil {
				t.Fatal(err)
			}
			body, _ := base64.StdEncoding.DecodeString(tc.BodyBase64)
			if id, ok := avro.SchemaIDOf(body); !ok || id != tc.SchemaID {
				t.Fatalf("SchemaIDOf = %d, %t", id, ok)
			}
			reader, err := avro.NewRegistered(ctx, reg, tc.ReaderSchema)
			if err != nil {
				t.Fatal(err)
			}
			var resolved map[string]any
			if err := reader.Decode(body, avro.ContentTypeRegistered, &resolved); err != nil {
				t.Fatal(err)
			}
			same(t, "resolved (the default)", resolved, tc.Resolved)

			// Into a struct of the reader's shape too.
			var order struct {
				OrderID  string `avro:"orderId" json:"orderId"`
				Total    int    `avro:"total" json:"total"`
				Currency string `avro:"currency" json:"currency"`
			}
			if err := reader.Decode(body, avro.ContentTypeRegistered, &order); err != nil {
				t.Fatal(err)
			}
			same(t, "resolved into a struct", order, tc.Resolved)

			for name, c := range map[string]*avro.Codec{
				"WithResolve(false)": must(avro.NewRegistered(ctx, reg, tc.ReaderSchema, avro.WithResolve(false))),
				"no schema":          must(avro.NewRegistered(ctx, reg, "")),
			} {
				var shape map[string]any
				if err := c.Decode(body, avro.ContentTypeRegistered, &shape); err != nil {
					t.Fatal(err)
				}
				same(t, "writer's shape, "+name, shape, tc.WriterShape)
			}

			// A fixed-schema codec never reads the registry frame, even
			// with the writer's schema.
			fixed := must(avro.NewFixed(tc.WriterSchema))
			var v map[string]any
			for _, ct := range []string{avro.ContentTypeRegistered, "application/avro", "application/vnd.acme+avro"} {
				err := fixed.Decode(body, ct, &v)
				var de *acemq.DecodeError
				if !errors.As(err, &de) || de.Retryable {
					t.Errorf("a fixed codec read a framed body as %s: %v %v", ct, v, err)
				}
			}
			if fixed.Accepts(avro.ContentTypeRegistered) {
				t.Error("a fixed codec accepts the registered content type")
			}
			// The same record, raw, reads in the fixed codec, and resolves
			// with WithWriterSchema.
			raw := body[5:]
			if err := fixed.Decode(raw, avro.ContentTypeFixed, &v); err != nil {
				t.Fatal(err)
			}
			same(t, "fixed, writer's schema", v, tc.WriterShape)
			resolving := must(avro.NewFixed(tc.ReaderSchema, avro.WithWriterSchema(tc.WriterSchema)))
			v = nil
			if err := resolving.Decode(raw, avro.ContentTypeFixed, &v); err != nil {
				t.Fatal(err)
			}
			same(t, "fixed, resolved", v, tc.Resolved)
		})
	}
}

func must(c *avro.Codec, err error) *avro.Codec {
	if err != nil {
		panic(err)
	}
	return c
}

const orderSchema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int"},{"name":"tags","type":{"type":"array","items":"string"}}]}`

type order struct {
	ID   string   `avro:"id"`
	Qty  int      `avro:"qty"`
	Tags []string `avro:"tags"`
}

func TestRegisteredRoundTripAndFraming(t *testing.T) {
	ctx := context.Background()
	reg := avro.NewRegistry(avro.NewMemoryStore())
	c := must(avro.NewRegistered(ctx, reg, orderSchema))
	again := must(avro.NewRegistered(ctx, reg, orderSchema))
	if c.SchemaID() == 0 || again.SchemaID() != c.SchemaID() {
		t.Fatalf("ids %d and %d: registration is not idempotent", c.SchemaID(), again.SchemaID())
	}
	other := must(avro.NewRegistered(ctx, reg, orderSchema+" "))
	if other.SchemaID() == c.SchemaID() {
		t.Fatal("different bytes got the same id: the fingerprint is of the exact bytes")
	}
	body, err := c.Encode(order{ID: "o-1", Qty: 2, Tags: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if body[0] != 0 || c.ContentType() != avro.ContentTypeRegistered {
		t.Fatalf("body % x, content type %s", body, c.ContentType())
	}
	if id, _ := avro.SchemaIDOf(body); id != c.SchemaID() {
		t.Fatalf("framed id %d, want %d", id, c.SchemaID())
	}
	var back order
	if err := c.Decode(body, "Application/VND.AceMQ.Avro; v=1", &back); err != nil || back.ID != "o-1" || back.Qty != 2 || len(back.Tags) != 1 {
		t.Fatalf("%+v, %v", back, err)
	}
	// An id the registry does not hold is fatal (parked), not retryable.
	body[1] = 0x7f
	err = c.Decode(body, avro.ContentTypeRegistered, &back)
	var de *acemq.DecodeError
	if !errors.As(err, &de) || de.Retryable || !errors.Is(err, avro.ErrNotFound) {
		t.Fatalf("an unknown id: %v", err)
	}
	for ct, want := range map[string]bool{avro.ContentTypeRegistered: true, "application/avro": true, "application/x.orders+avro": true, "avro/binary": false, "": false, "application/json": false} {
		if c.Accepts(ct) != want {
			t.Errorf("Accepts(%q) = %t", ct, !want)
		}
	}
}

func TestFixedRoundTrip(t *testing.T) {
	c := must(avro.NewFixed(orderSchema))
	body, err := c.Encode(order{ID: "o-2", Qty: 3})
	if err != nil {
		t.Fatal(err)
	}
	var back order
	if err := c.Decode(body, "avro/binary", &back); err != nil || back.ID != "o-2" {
		t.Fatalf("%+v %v", back, err)
	}
	if !c.Accepts("AVRO/BINARY") || c.Accepts("") || c.ContentType() != "avro/binary" {
		t.Error("content types")
	}
	if _, err := avro.NewFixed(`{"type":"nope"}`); err == nil {
		t.Error("an invalid schema was accepted")
	}
}

type failingStore struct{ avro.Store }

func (failingStore) Get(context.Context, uint32) (string, error) {
	return "", errors.New("connection refused")
}

// A store that cannot be read is retryable: the registry will be back.
func TestStoreFailureIsRetryable(t *testing.T) {
	ctx := context.Background()
	writer := must(avro.NewRegistered(ctx, avro.NewRegistry(avro.NewMemoryStore()), orderSchema))
	body, _ := writer.Encode(order{ID: "x"})
	reader := must(avro.NewRegistered(ctx, avro.NewRegistry(failingStore{avro.NewMemoryStore()}), ""))
	var v map[string]any
	err := reader.Decode(body, avro.ContentTypeRegistered, &v)
	var de *acemq.DecodeError
	if !errors.As(err, &de) || !de.Retryable {
		t.Fatalf("%v, want a retryable DecodeError", err)
	}
}

func TestMemoryStorePutConflicts(t *testing.T) {
	ctx := context.Background()
	reg := avro.NewRegistry(avro.NewMemoryStore())
	if err := reg.Put(ctx, 101, orderSchema); err != nil {
		t.Fatal(err)
	}
	if err := reg.Put(ctx, 101, orderSchema); err != nil {
		t.Fatalf("the same schema under the same id again: %v", err)
	}
	if err := reg.Put(ctx, 101, `"string"`); !errors.Is(err, avro.ErrConflict) {
		t.Fatalf("another schema under 101: %v", err)
	}
	if err := reg.Put(ctx, 7, orderSchema); !errors.Is(err, avro.ErrConflict) {
		t.Fatalf("the same schema under another id: %v", err)
	}
	if id, _ := reg.Register(ctx, orderSchema); id != 101 {
		t.Fatalf("Register of a stored schema = %d, want 101", id)
	}
}

// FuzzDecode: hostile bodies neither crash the codecs nor make them
// allocate what the body cannot hold.
// avroBytesPerByte bounds what Decode allocates per body byte, and
// avroBytesFixed what it allocates besides (docs/codecs.md): measured
// worst, a recursive record decoded into any, about 1,550 per byte; an
// array of one-int records, about 400.
const (
	avroBytesPerByte = 2048
	avroBytesFixed   = 64 << 10
)

const nodeSchema = `{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]}]}`

// nodes is a Node list depth long: union branch 1 (zig-zag 2) depth times,
// then null.
func nodes(depth int) []byte { return append(bytes.Repeat([]byte{2}, depth), 0) }

func FuzzDecode(f *testing.F) {
	ctx := context.Background()
	reg := avro.NewRegistry(avro.NewMemoryStore())
	reg2 := `{"type":"record","name":"R","fields":[{"name":"m","type":{"type":"map","values":"bytes"}},{"name":"a","type":{"type":"array","items":"null"}},{"name":"u","type":["null","string","long"]}]}`
	registered := must(avro.NewRegistered(ctx, reg, orderSchema))
	generic := must(avro.NewRegistered(ctx, reg, reg2))
	fixed := must(avro.NewFixed(orderSchema))
	recursive := must(avro.NewFixed(nodeSchema))
	good, _ := registered.Encode(order{ID: "o-1", Qty: 2, Tags: []string{"a", "b"}})
	f.Add(good, uint8(0))
	f.Add(good[5:], uint8(1))
	f.Add([]byte{0, 0, 0, 0, 1, 0xfe, 0xff, 0xff, 0xff, 0x0f}, uint8(0))
	f.Add([]byte{0xfe, 0xff, 0xff, 0xff, 0x0f}, uint8(1))
	f.Add(good[:5], uint8(0))
	f.Add(append(good, 1, 2, 3), uint8(0))
	f.Add(nodes(5000), uint8(4))
	f.Fuzz(func(t *testing.T, body []byte, which uint8) {
		var o order
		var m map[string]any
		var a any
		allocbound.Check(t, len(body), avroBytesPerByte, avroBytesFixed, func() {
			switch which % 5 {
			case 0:
				_ = registered.Decode(body, avro.ContentTypeRegistered, &o)
				_ = registered.Decode(body, "application/avro", &m)
			case 1:
				_ = fixed.Decode(body, avro.ContentTypeFixed, &o)
				_ = fixed.Decode(body, "application/avro", &a)
			case 2:
				_ = generic.Decode(body, avro.ContentTypeRegistered, &m)
			case 3:
				_ = generic.Decode(body, avro.ContentTypeRegistered, &a)
			case 4:
				_ = recursive.Decode(body, avro.ContentTypeFixed, &a)
			}
		})
	})
}

// A body that is only the registry frame, or a record cut short, used to
// decode to zero values with no error; bytes after the record were
// ignored. Both are refused now.
func TestTruncatedAndTrailingBodiesAreRefused(t *testing.T) {
	ctx := context.Background()
	c := must(avro.NewRegistered(ctx, avro.NewRegistry(avro.NewMemoryStore()), orderSchema))
	fixed := must(avro.NewFixed(orderSchema))
	good, _ := c.Encode(order{ID: "o-1", Qty: 2, Tags: []string{"a", "b"}})
	var o order
	if err := c.Decode(good, avro.ContentTypeRegistered, &o); err != nil || o.ID != "o-1" || len(o.Tags) != 2 {
		t.Fatalf("the whole body: %+v, %v", o, err)
	}
	for name, tc := range map[string]struct {
		c    *avro.Codec
		ct   string
		body []byte
		want string
	}{
		"only the frame":        {c, avro.ContentTypeRegistered, good[:5], "truncated"},
		"cut in the array":      {c, avro.ContentTypeRegistered, good[:len(good)-2], "truncated"},
		"garbage after":         {c, avro.ContentTypeRegistered, append(append([]byte(nil), good...), 0xde, 0xad), "2 bytes follow the value"},
		"raw, empty":            {fixed, avro.ContentTypeFixed, nil, "truncated"},
		"raw, garbage after":    {fixed, avro.ContentTypeFixed, append(append([]byte(nil), good[5:]...), 7), "1 bytes follow the value"},
		"a string past the end": {fixed, avro.ContentTypeFixed, []byte{0x7e}, "truncated"},
	} {
		var o order
		err := tc.c.Decode(tc.body, tc.ct, &o)
		var de *acemq.DecodeError
		if !errors.As(err, &de) || de.Retryable || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (decoded %+v), want a non-retryable DecodeError saying %q", name, err, o, tc.want)
		}
	}
}

// A recursive schema lets a body choose its depth, and hamba/avro spends
// about 1.5 KB a level: a 1 MB body took 1.5 GB. The codec refuses more
// than 128 levels before decoding.
func TestRecursiveDepthIsBounded(t *testing.T) {
	c := must(avro.NewFixed(nodeSchema))
	var v any
	if err := c.Decode(nodes(avro.DefaultMaxDepth-1), avro.ContentTypeFixed, &v); err != nil {
		t.Fatalf("%d levels: %v", avro.DefaultMaxDepth, err)
	}
	body := nodes(100000)
	var err error
	n := allocbound.Check(t, len(body), 1, 64<<10, func() { err = c.Decode(body, avro.ContentTypeFixed, &v) })
	var de *acemq.DecodeError
	if !errors.As(err, &de) || de.Retryable || !errors.Is(err, acemq.ErrTooDeep) ||
		!strings.Contains(err.Error(), "body nests deeper than the avro codec's limit of 128 levels") {
		t.Fatalf("100,000 levels: %v", err)
	}
	t.Logf("%d levels refused for %d bytes allocated", len(body), n)
	err = must(avro.NewFixed(nodeSchema, avro.WithMaxDepth(3))).Decode(nodes(3), avro.ContentTypeFixed, &v)
	if !errors.Is(err, acemq.ErrTooDeep) {
		t.Fatalf("WithMaxDepth(3), 4 levels: %v", err)
	}
	if _, err := avro.NewFixed(nodeSchema, avro.WithMaxDepth(0)); err == nil || !strings.Contains(err.Error(), "avro: the bounds must be positive") {
		t.Errorf("WithMaxDepth(0): %v", err)
	}
	if _, err := avro.NewRegistered(context.Background(), avro.NewRegistry(avro.NewMemoryStore()), nodeSchema, avro.WithMaxBodySize(-1)); err == nil {
		t.Errorf("NewRegistered with WithMaxBodySize(-1): no error")
	}
	err = must(avro.NewFixed(nodeSchema, avro.WithMaxBodySize(3))).Decode(nodes(3), avro.ContentTypeFixed, &v)
	if !errors.Is(err, acemq.ErrTooLarge) || !strings.Contains(err.Error(), "body of 4 bytes exceeds the avro codec's limit of 3") {
		t.Fatalf("WithMaxBodySize(3): %v", err)
	}
}

// A ten-byte body claiming sixteen million array items, or a gigabyte
// string, costs an error, not the memory it claims.
func TestHostileLengthsDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	c := must(avro.NewRegistered(ctx, avro.NewRegistry(avro.NewMemoryStore()), orderSchema))
	frame := []byte{0, 0, 0, 0, byte(c.SchemaID())}
	zigzag := func(n uint64) []byte {
		n <<= 1
		var b []byte
		for n >= 0x80 {
			b = append(b, byte(n)|0x80)
			n >>= 7
		}
		return append(b, byte(n))
	}
	for name, rest := range map[string][]byte{
		"array":  append([]byte{0, 0}, zigzag(1<<24)...), // id "", qty 0, 16M items
		"string": zigzag(1 << 30),                        // a 1 GiB id
	} {
		body := append(append([]byte(nil), frame...), rest...)
		var o order
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := c.Decode(body, avro.ContentTypeRegistered, &o)
		runtime.ReadMemStats(&after)
		var de *acemq.DecodeError
		if !errors.As(err, &de) || de.Retryable {
			t.Errorf("%s: %v, want a non-retryable DecodeError", name, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: a %d-byte body made the decoder allocate %d bytes", name, len(body), n)
		}
	}
}
