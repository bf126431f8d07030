package main

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/cli/consume"
	"github.com/acemq/acemq/internal/cli/envelope"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/wire"
)

// decodeMap runs decodeEnvelope and parses its output.
func decodeMap(t *testing.T, in string) map[string]any {
	t.Helper()
	out, err := envelope.Decode([]byte(in))
	if err != nil {
		t.Fatalf("decode %s: %v", in, err)
	}
	return parseObject(t, out)
}

func parseObject(t testing.TB, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("output is not a JSON object: %q: %v", b, err)
	}
	return m
}

func TestDecodeFieldsAndDefaults(t *testing.T) {
	m := decodeMap(t, `{"routingKey":"order.placed","messageId":"m-1","headers":{"x-tenant":"acme","x-count":7,"x-ratio":1.5,"x-raw":{"$bytes":"AAE="}}}`)
	want := map[string]any{
		"id": "m-1", "type": "order.placed", "version": json.Number("1"), "correlationId": "m-1",
		"causationId": "", "attempt": json.Number("1"), "firstSeen": nil, "origin": "", "error": "",
		"claim": "", "route": []any{}, "routePosition": json.Number("0"), "routeId": "",
		"headers": map[string]any{"x-tenant": "acme", "x-count": json.Number("7"), "x-ratio": json.Number("1.5"), "x-raw": map[string]any{"$bytes": "AAE="}},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("decode:\n got %v\nwant %v", m, want)
	}
}

func TestDecodeOrderOfKeys(t *testing.T) {
	out, err := envelope.Decode([]byte(`{"routingKey":"k"}`))
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"id", "type", "version", "correlationId", "causationId", "attempt", "firstSeen", "origin", "error", "claim", "route", "routePosition", "routeId", "headers"}
	last := -1
	for _, k := range keys {
		i := bytes.Index(out, []byte(`"`+k+`":`))
		if i <= last {
			t.Fatalf("key %q out of order in %s", k, out)
		}
		last = i
	}
}

func TestDecodeReadsEveryEncoding(t *testing.T) {
	m := decodeMap(t, `{"routingKey":"","messageId":"","headers":{
		"x-acemq-id":{"$bytes":"aWQtMQ=="},
		"x-acemq-attempt":"3",
		"x-acemq-version":2.0,
		"x-acemq-first-seen":1767323045678,
		"x-acemq-route":" validate, reserve ,,dispatch",
		"x-acemq-route-position":-4,
		"x-acemq-route-id":"run-1",
		"x-acemq-future":"hidden",
		"x-acemq-error":"",
		"traceparent":"00-abc"
	}}`)
	if m["id"] != "id-1" || m["type"] != "message" || m["attempt"] != json.Number("3") || m["version"] != json.Number("2") {
		t.Errorf("fields read wrongly: %v", m)
	}
	if m["firstSeen"] != json.Number("1767323045678") {
		t.Errorf("firstSeen = %v", m["firstSeen"])
	}
	if !reflect.DeepEqual(m["route"], []any{"validate", "reserve", "dispatch"}) || m["routePosition"] != json.Number("0") {
		t.Errorf("route = %v @ %v", m["route"], m["routePosition"])
	}
	h := m["headers"].(map[string]any)
	if len(h) != 1 || h["traceparent"] != "00-abc" {
		t.Errorf("application headers = %v; want only traceparent", h)
	}
}

func TestDecodeMalformed(t *testing.T) {
	for _, in := range []string{
		``, `   `, `[]`, `"x"`, `{`, `{"headers":[]}`, `{"headers":{"a":{"$bytes":"!!"}}}`,
		`{"headers":{"a":{"$bytes":1}}}`, `{"routingKey":5}`, `{} {}`, `{"messageId":{}}`,
		`{"headers":{"a":{"$timestamp":"yesterday"}}}`,
	} {
		_, err := envelope.Decode([]byte(in))
		if err == nil {
			t.Errorf("decode %q: no error", in)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("decode %q: error is more than one line: %q", in, err)
		}
	}
}

func TestEncodeWritesWireHeaders(t *testing.T) {
	out, err := envelope.Encode([]byte(`{"routingKey":"fx.rich","envelope":{
		"id":"11111111-2222-3333-4444-555555555555","type":"order.placed","version":3,
		"correlationId":"corr-1","causationId":"cause-1","origin":"orders@host-7",
		"firstSeen":1767323045678,"route":["a","b"],"routePosition":0,
		"headers":{"x-tenant":"acme","x-n":5}}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := parseObject(t, out)
	want := map[string]any{
		"messageId": "11111111-2222-3333-4444-555555555555",
		"headers": map[string]any{
			"x-acemq-id": "11111111-2222-3333-4444-555555555555", "x-acemq-type": "order.placed",
			"x-acemq-version": json.Number("3"), "x-acemq-correlation": "corr-1", "x-acemq-causation": "cause-1",
			"x-acemq-attempt": json.Number("1"), "x-acemq-first-seen": json.Number("1767323045678"),
			"x-acemq-origin": "orders@host-7", "x-acemq-route": "a,b", "x-acemq-route-position": json.Number("0"),
			"x-tenant": "acme", "x-n": json.Number("5"),
		},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("encode:\n got %v\nwant %v", m, want)
	}
}

func TestEncodeDefaults(t *testing.T) {
	out, err := envelope.Encode([]byte(`{"routingKey":"k"}`))
	if err != nil {
		t.Fatal(err)
	}
	m := parseObject(t, out)
	h := m["headers"].(map[string]any)
	if h["x-acemq-id"] != m["messageId"] || h["x-acemq-correlation"] != m["messageId"] || h["x-acemq-type"] != "k" {
		t.Errorf("defaults not applied: %v", m)
	}
	if _, err := h["x-acemq-first-seen"].(json.Number).Int64(); err != nil {
		t.Errorf("first-seen is not an integer: %v", h["x-acemq-first-seen"])
	}
	if len(h) != 7 {
		t.Errorf("want the seven always-written headers, got %v", h)
	}
}

func TestEncodeRefusesReservedNames(t *testing.T) {
	_, err := envelope.Encode([]byte(`{"routingKey":"k","envelope":{"headers":{"x-acemq-id":"mine","X-AceMQ-Attempt":2,"ok":1}}}`))
	if err == nil {
		t.Fatal("a reserved header name was accepted")
	}
	for _, name := range []string{"x-acemq-id", "X-AceMQ-Attempt"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
	if strings.Contains(err.Error(), "ok") && !strings.Contains(err.Error(), "cannot") {
		t.Errorf("error %q names a header that is not reserved", err)
	}
}

func TestEncodeMalformed(t *testing.T) {
	for _, in := range []string{
		`{"envelope":[]}`, `{"envelope":{"version":"x"}}`, `{"envelope":{"attempt":1.5}}`,
		`{"envelope":{"firstSeen":"now"}}`, `{"envelope":{"route":"a,b"}}`, `{"envelope":{"version":99999999999}}`,
	} {
		if _, err := envelope.Encode([]byte(in)); err == nil {
			t.Errorf("encode %q: no error", in)
		}
	}
}

// TestEnvelopeFixtureRoundTrip feeds every case of the Java fixture through
// the binary: decode reads the fields the fixture pins, and encode of what
// decode printed writes back exactly the fixture's headers.
func TestEnvelopeFixtureRoundTrip(t *testing.T) {
	raw, err := os.ReadFile(testenv.ContractFile(t, "envelope-fixtures.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Cases []json.RawMessage `json:"cases"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx.Cases) == 0 {
		t.Fatal("the fixture has no cases")
	}
	for _, c := range fx.Cases {
		fixture := parseObject(t, c)
		t.Run(fixture["case"].(string), func(t *testing.T) {
			dec := parseObject(t, []byte(runCLI(t, string(c), "envelope", "decode").wantCode(t, 0).stdout))
			wantHeaders := fixture["headers"].(map[string]any)
			if dec["id"] != wantHeaders["x-acemq-id"] || dec["correlationId"] != wantHeaders["x-acemq-correlation"] {
				t.Errorf("id/correlation: %v", dec)
			}
			if dec["firstSeen"] != wantHeaders["x-acemq-first-seen"] {
				t.Errorf("firstSeen %v, want %v", dec["firstSeen"], wantHeaders["x-acemq-first-seen"])
			}
			for k := range dec["headers"].(map[string]any) {
				if strings.HasPrefix(k, "x-acemq-") {
					t.Errorf("reserved header %s among the application headers", k)
				}
			}
			encIn, _ := json.Marshal(map[string]any{"routingKey": fixture["routingKey"], "envelope": dec})
			enc := parseObject(t, []byte(runCLI(t, string(encIn), "envelope", "encode").wantCode(t, 0).stdout))
			if enc["messageId"] != fixture["messageId"] {
				t.Errorf("messageId %v, want %v", enc["messageId"], fixture["messageId"])
			}
			if !reflect.DeepEqual(enc["headers"], wantHeaders) {
				t.Errorf("headers written:\n got %v\nwant %v", enc["headers"], wantHeaders)
			}
		})
	}
}

func TestEnvelopeBinaryExitCodes(t *testing.T) {
	r := runCLI(t, "{not json", "envelope", "decode").wantCode(t, 1)
	if r.stdout != "" || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.HasPrefix(r.stderr, "acemq: ") {
		t.Errorf("malformed input: stdout %q, stderr %q; want one line on stderr only", r.stdout, r.stderr)
	}
	r = runCLI(t, `{"routingKey":"k","envelope":{"headers":{"x-acemq-origin":"me"}}}`, "envelope", "encode").wantCode(t, 1)
	if !strings.Contains(r.stderr, "x-acemq-origin") {
		t.Errorf("stderr %q does not name the reserved header", r.stderr)
	}
	runCLI(t, "", "envelope").wantCode(t, 1)
	runCLI(t, "{}", "envelope", "decode", "extra").wantCode(t, 1)
}

// FuzzEnvelopeDecode feeds arbitrary input to decode: it must never panic,
// always print a single JSON object or return a one-line error, and what it
// prints must encode and decode back to the same fields.
func FuzzEnvelopeDecode(f *testing.F) {
	for _, s := range []string{
		`{"routingKey":"order.placed","messageId":"m-1","headers":{"x-tenant":"acme"}}`,
		`{"routingKey":"","messageId":"","headers":{"x-acemq-attempt":"2","x-acemq-first-seen":1.767323045678e12}}`,
		`{"headers":{"x-acemq-route":"a,b","x-acemq-route-position":1,"x-acemq-route-id":"r"}}`,
		`{"headers":{"x-acemq-id":{"$bytes":"aWQ="},"b":{"$bytes":"/w=="},"n":[1,2.5,null,true,{"x":{}}]}}`,
		`{"headers":{"x-acemq-version":-3,"x-acemq-attempt":true,"d":{"$decimal":"-1.05"},"t":{"$timestamp":"2026-01-02T03:04:05Z"}}}`,
		`{"headers":{"f":{"$float":"NaN"},"x-acemq-future":7}}`,
		`{}`, `[]`, `{"headers":null}`, `{"routingKey":"k"} trailing`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := envelope.Decode(in)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		first := parseObject(t, out)
		var rk string
		var top map[string]json.RawMessage
		if json.Unmarshal(in, &top) == nil {
			_ = json.Unmarshal(top["routingKey"], &rk)
		}
		encIn, err := json.Marshal(map[string]any{"routingKey": rk, "envelope": first})
		if err != nil {
			t.Fatal(err)
		}
		enc, err := envelope.Encode(encIn)
		if err != nil {
			t.Fatalf("encode of decode's output failed: %v\ninput %s\ndecoded %s", err, in, out)
		}
		var wire struct {
			MessageID string          `json:"messageId"`
			Headers   json.RawMessage `json:"headers"`
		}
		if err := json.Unmarshal(enc, &wire); err != nil {
			t.Fatal(err)
		}
		again, err := json.Marshal(map[string]any{"routingKey": rk, "messageId": wire.MessageID, "headers": wire.Headers})
		if err != nil {
			t.Fatal(err)
		}
		out2, err := envelope.Decode(again)
		if err != nil {
			t.Fatalf("decode of encode's output failed: %v", err)
		}
		second := parseObject(t, out2)
		if first["firstSeen"] == nil {
			// Encode stamps now for an unknown first-seen.
			delete(first, "firstSeen")
			delete(second, "firstSeen")
		}
		if !reflect.DeepEqual(first, second) {
			t.Fatalf("round trip changed the envelope:\n in  %s\n 1st %s\n 2nd %s", in, out, out2)
		}
	})
}

// TestEncodeOriginRule: encode stamps this host's origin, as a connection
// does, on an envelope that names none (absent or null), and none on one
// whose origin is "" (as decode prints an absent origin).
func TestEncodeOriginRule(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{`{}`, wire.DefaultOrigin()},
		{`{"origin":null}`, wire.DefaultOrigin()},
		{`{"Origin":"x@y"}`, "x@y"},
		{`{"origin":""}`, ""},
	} {
		out, err := envelope.Encode([]byte(`{"routingKey":"k","envelope":` + tc.env + `}`))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := parseObject(t, out)["headers"].(map[string]any)[wire.HeaderOrigin].(string)
		if got != tc.want {
			t.Errorf("envelope %s: origin %q, want %q", tc.env, got, tc.want)
		}
	}
}

// TestConsumeLinesSpliceTheLibrarysJSON: a line of consume --json is the
// envelope's JSON form, as decode prints it, followed by the delivery's
// fields; the text form prints the same header values.
func TestConsumeLinesSpliceTheLibrarysJSON(t *testing.T) {
	headers := map[string]any{wire.HeaderFirstSeen: int64(1767323045678), "x-tenant": "acme", "raw": []byte{0, 1}, "h<&>": 1.5}
	m := acemq.Message[[]byte]{
		Envelope: acemq.ReadEnvelope(headers, "orders", "m-1"), RoutingKey: "orders",
		ContentType: "application/json", Redelivered: true, Body: []byte(`{"id":"o-1"}`),
	}
	m.Payload = m.Body
	var b bytes.Buffer
	if err := consume.PrintMessage(&b, 1, m, true, cli.Opened{}); err != nil {
		t.Fatal(err)
	}
	want := `{"id":"m-1","type":"orders","version":1,"correlationId":"m-1","causationId":"","attempt":1,"firstSeen":1767323045678,"origin":"","error":"","claim":"","route":[],"routePosition":0,"routeId":"","headers":{"h<&>":1.5,"raw":{"$bytes":"AAE="},"x-tenant":"acme"},` +
		`"routingKey":"orders","exchange":"","contentType":"application/json","redelivered":true,"replyTo":"","body":"{\"id\":\"o-1\"}"}` + "\n"
	if b.String() != want {
		t.Errorf("consume --json printed\n %s\nwant\n %s", b.String(), want)
	}
	dec, err := envelope.Decode([]byte(`{"routingKey":"orders","messageId":"m-1","headers":{"x-acemq-first-seen":1767323045678,"x-tenant":"acme","raw":{"$bytes":"AAE="},"h<&>":1.5}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), strings.TrimSuffix(string(dec), "}\n")+",") {
		t.Errorf("consume --json does not begin with what decode prints:\n %s\n %s", b.String(), dec)
	}
	b.Reset()
	if err := consume.PrintMessage(&b, 1, m, false, cli.Opened{}); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"    header h<&>: 1.5\n", "    header raw: {\"$bytes\":\"AAE=\"}\n", "    header x-tenant: \"acme\"\n", "    id=m-1 type=orders version=1 attempt=1 correlation=m-1 firstSeen=2026-01-02T03:04:05.678Z\n"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("consume printed\n%s\nwithout %q", b.String(), line)
		}
	}
}
