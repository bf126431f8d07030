package acemq

import (
	"reflect"
	"testing"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
)

// nativeTable stands for a driver's own table type in a delivery handed up
// unconverted (driver.Delivery.HeaderValue).
type nativeTable map[string]any

// TestDeliveryEnvelopeConvertsWhatItKeeps: the envelope of a delivery
// whose driver left its headers unconverted is the envelope of the
// converted headers: application and unknown reserved headers go through
// HeaderValue, the known ones are read as they are.
func TestDeliveryEnvelopeConvertsWhatItKeeps(t *testing.T) {
	value := func(v any) any {
		if n, ok := v.(nativeTable); ok {
			return driver.Table(n)
		}
		return v
	}
	raw := driver.Table{
		wire.HeaderID:      "m-1",
		wire.HeaderType:    "order.placed",
		wire.HeaderAttempt: int32(2),
		"app":              nativeTable{"k": "v"},
		"plain":            "s",
		"x-acemq-future":   nativeTable{"f": int64(1)},
	}
	converted := driver.Table{}
	for k, v := range raw {
		converted[k] = value(v)
	}
	d := driver.Delivery{Headers: raw, RoutingKey: "rk", MessageID: "mid", HeaderValue: value}
	got := deliveryEnvelope(&d)
	want := ReadEnvelope(converted, "rk", "mid")
	got.firstSeen = want.firstSeen // unknown, so now on both
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("deliveryEnvelope = %#v\nwant %#v", got, want)
	}
	if _, ok := got.Headers()["app"].(map[string]any); !ok {
		t.Fatalf("app = %#v, want the converted table", got.Headers()["app"])
	}
	d.HeaderValue = nil
	if got := deliveryEnvelope(&d); reflect.DeepEqual(got.Headers()["app"], want.Headers()["app"]) {
		t.Fatal("without HeaderValue the values were converted anyway: the test cannot tell")
	}
}
