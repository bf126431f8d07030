package acemq

import (
	"context"
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// encodeTable writes t as an AMQP 0-9-1 field table (the 0-9-1 errata's
// type octets, as RabbitMQ and amqp091-go read them), for checking the
// size a publisher adds up against the bytes themselves. It knows only the
// scalar types wire.ScalarSize counts and fails the test on anything else.
func encodeTable(t *testing.T, tbl map[string]any) []byte {
	t.Helper()
	var body []byte
	for k, v := range tbl {
		body = append(body, byte(len(k)))
		body = append(body, k...)
		switch x := v.(type) {
		case string:
			body = append(body, 'S')
			body = binary.BigEndian.AppendUint32(body, uint32(len(x)))
			body = append(body, x...)
		case []byte:
			body = append(body, 'x')
			body = binary.BigEndian.AppendUint32(body, uint32(len(x)))
			body = append(body, x...)
		case bool:
			body = append(body, 't', 0)
		case int8:
			body = append(body, 'b', byte(x))
		case uint8:
			body = append(body, 'B', x)
		case int16:
			body = binary.BigEndian.AppendUint16(append(body, 's'), uint16(x))
		case uint16:
			body = binary.BigEndian.AppendUint16(append(body, 'u'), x)
		case int32:
			body = binary.BigEndian.AppendUint32(append(body, 'I'), uint32(x))
		case uint32:
			body = binary.BigEndian.AppendUint32(append(body, 'i'), x)
		case int64:
			body = binary.BigEndian.AppendUint64(append(body, 'l'), uint64(x))
		case float32:
			body = binary.BigEndian.AppendUint32(append(body, 'f'), math.Float32bits(x))
		case float64:
			body = binary.BigEndian.AppendUint64(append(body, 'd'), math.Float64bits(x))
		case time.Time:
			body = binary.BigEndian.AppendUint64(append(body, 'T'), uint64(x.Unix()))
		case nil:
			body = append(body, 'V')
		default:
			t.Fatalf("encodeTable: header %q holds a %T", k, v)
		}
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// The size a publisher puts on a message (driver.Message.HeaderSize) is
// the size of the table it wrote, byte for byte, for every field an
// envelope can carry and every flat scalar an application header can
// hold; with a value that is not a flat scalar it is 0, and the driver
// measures the table itself.
func TestMessageHeaderSize(t *testing.T) {
	full := Fields{
		Type: "order.created", Version: 3, CorrelationID: "corr-1", CausationID: "cause-1", Origin: "svc@host",
		Headers: map[string]any{
			"s": "text", "bytes": []byte{1, 2, 3}, "flag": true, "i8": int8(-3), "u8": uint8(200),
			"i16": int16(-300), "u16": uint16(60000), "i32": int32(-70000), "u32": uint32(4000000000),
			"i64": int64(1) << 40, "n": 7, "f32": float32(1.5), "f64": 2.25, "when": time.Unix(1700000000, 0),
			"none": nil,
		},
	}
	withRoute, err := MustEnvelope(full).Change(func(f *Fields) {
		f.Route = []string{"a", "b"}
		f.RouteID = "route-1"
		f.Claim = "claim://x"
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string]Envelope{
		"default":         {},
		"fresh":           MustEnvelope(Fields{}),
		"full":            MustEnvelope(full),
		"route and claim": withRoute,
		"read back":       ReadEnvelope(MustEnvelope(full).AppendHeaders(nil, "orders"), "orders", ""),
		"read with error": ReadEnvelope(map[string]any{"x-acemq-id": "m-1", "x-acemq-error": "bad input", "x-acemq-future": "kept"}, "orders", ""),
	} {
		for _, boxes := range []*headerBoxes{nil, new(headerBoxes)} {
			m := testMessage("ex", "orders", env, "application/json", nil, boxes)
			if want := len(encodeTable(t, m.Headers)); m.HeaderSize != want {
				t.Errorf("%s (boxes %v): HeaderSize %d, the table encodes in %d bytes: %v", name, boxes != nil, m.HeaderSize, want, m.Headers)
			}
		}
	}
	for name, v := range map[string]any{
		"a nested table": map[string]any{"k": "v"},
		"an array":       []any{"a"},
		"a decimal":      driver.Decimal{Scale: 2, Value: 1234},
	} {
		env := MustEnvelope(Fields{Headers: map[string]any{"h": v}})
		if m := testMessage("", "orders", env, "", nil, nil); m.HeaderSize != 0 {
			t.Errorf("with %s: HeaderSize %d, want 0", name, m.HeaderSize)
		}
	}
	// A name too long for a short string leaves the size to the driver,
	// whatever its value.
	for _, v := range []any{"v", int32(1), int64(1), true, 2.5} {
		env := MustEnvelope(Fields{Headers: map[string]any{strings.Repeat("n", 256): v}})
		if m := testMessage("", "orders", env, "", nil, nil); m.HeaderSize != 0 {
			t.Errorf("with a 256-byte name holding a %T: HeaderSize %d, want 0", v, m.HeaderSize)
		}
	}
	// Into a table that already has entries, the size is unknown.
	fresh := MustEnvelope(Fields{})
	if _, n := fresh.writeHeaders(map[string]any{"other": "x"}, "orders", nil); n != 0 {
		t.Errorf("writing into a non-empty table: size %d, want 0", n)
	}
}

// A publish that carries trace headers has them added after the size was
// counted: publishStart clears the size, so the driver measures the table.
func TestPublishStartClearsHeaderSizeWithTraceHeaders(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	o := newObserver(telemetryConfig{meters: metricnoop.NewMeterProvider(), tracers: tp})
	m := testMessage("", "orders", MustEnvelope(Fields{}), "application/json", nil, nil)
	if m.HeaderSize == 0 {
		t.Fatal("no HeaderSize on a fresh envelope's message")
	}
	_, done := o.publishStart(context.Background(), &m, identity(&Envelope{}))
	done(nil, 0)
	if _, ok := m.Headers["traceparent"]; !ok {
		t.Fatal("publishStart wrote no traceparent")
	}
	if m.HeaderSize != 0 {
		t.Errorf("HeaderSize %d after trace headers were added, want 0", m.HeaderSize)
	}
}

// testMessage is messageBoxed returning the message, for a copy of env
// completed with the defaults.
func testMessage(exchange, routingKey string, env Envelope, contentType string, body []byte, boxes *headerBoxes) driver.Message {
	env = env.orDefault()
	var m driver.Message
	messageBoxed(&m, exchange, routingKey, &env, contentType, body, boxes)
	return m
}
