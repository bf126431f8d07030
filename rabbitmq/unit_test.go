package rabbitmq

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
	amqp "github.com/rabbitmq/amqp091-go"
)

func TestToAMQPTable(t *testing.T) {
	flat := driver.Table{"a": "x", "b": int64(1), "t": time.Unix(1, 0)}
	at, err := toAMQPTable(flat)
	if err != nil {
		t.Fatal(err)
	}
	if err := at.Validate(); err != nil {
		t.Fatal(err)
	}
	nested := driver.Table{
		"n":   driver.Table{"d": driver.Decimal{Scale: 1, Value: 5}, "u": uint64(7)},
		"arr": []any{driver.Table{"k": uint(3)}, "s"},
	}
	at, err = toAMQPTable(nested)
	if err != nil {
		t.Fatal(err)
	}
	if err := at.Validate(); err != nil {
		t.Fatalf("converted table is not valid for amqp091: %v", err)
	}
	n := at["n"].(amqp.Table)
	if n["d"] != (amqp.Decimal{Scale: 1, Value: 5}) || n["u"] != int64(7) {
		t.Fatalf("nested = %#v", n)
	}
	if _, ok := nested["n"].(driver.Table)["d"].(driver.Decimal); !ok {
		t.Fatal("the caller's table was modified")
	}
	if _, err := toAMQPTable(driver.Table{"bad": struct{}{}}); err == nil {
		t.Fatal("an unsupported value was accepted")
	}
	if _, err := toAMQPTable(driver.Table{"big": uint64(1 << 63)}); err == nil {
		t.Fatal("an out-of-range uint64 was accepted")
	}
}

func TestFromAMQPTable(t *testing.T) {
	in := amqp.Table{
		"x-death": []any{amqp.Table{"count": int64(1), "d": amqp.Decimal{Scale: 2, Value: 1}}},
		"n":       amqp.Table{"m": amqp.Table{"k": "v"}},
		"s":       "plain",
	}
	out := fromAMQPTable(in)
	deaths := out["x-death"].([]any)
	death, ok := deaths[0].(driver.Table)
	if !ok || death["d"] != (driver.Decimal{Scale: 2, Value: 1}) {
		t.Fatalf("x-death = %#v", out["x-death"])
	}
	if _, ok := out["n"].(driver.Table)["m"].(driver.Table); !ok {
		t.Fatalf("n = %#v", out["n"])
	}
	if fromAMQPTable(nil) != nil {
		t.Fatal("nil table")
	}
}

// TestToDeliveryUnconverted: a delivery handed up unconverted carries
// amqp091's table itself, and its HeaderValue gives every value as the
// converted delivery has it.
func TestToDeliveryUnconverted(t *testing.T) {
	headers := amqp.Table{
		"x-death": []any{amqp.Table{"count": int64(1), "d": amqp.Decimal{Scale: 2, Value: 1}}},
		"n":       amqp.Table{"m": amqp.Table{"k": "v"}},
		"d":       amqp.Decimal{Scale: 1, Value: 5},
		"s":       "plain",
	}
	converted := toDelivery(&amqp.Delivery{Headers: headers}, nil, false)
	if converted.HeaderValue != nil {
		t.Fatal("a converted delivery has a HeaderValue")
	}
	d := toDelivery(&amqp.Delivery{Headers: headers}, nil, true)
	if d.HeaderValue == nil || len(d.Headers) != len(headers) {
		t.Fatalf("unconverted: HeaderValue %v, %d headers", d.HeaderValue != nil, len(d.Headers))
	}
	if _, ok := d.Headers["n"].(amqp.Table); !ok {
		t.Fatalf("unconverted n = %#v, want amqp091's table as it is", d.Headers["n"])
	}
	for k, v := range d.Headers {
		if got, want := d.HeaderValue(v), converted.Headers[k]; !reflect.DeepEqual(got, want) {
			t.Errorf("HeaderValue(%s) = %#v, want %#v", k, got, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 5: 16 * time.Second, 6: 30 * time.Second, 40: 30 * time.Second} {
		for range 20 {
			d := backoff(n)
			if d < want*8/10 || d > min(want*12/10, 30*time.Second) {
				t.Fatalf("backoff(%d) = %v, want %v ± 20%% capped at 30s", n, d, want)
			}
		}
	}
}

func TestConfigDefaultsAndChecks(t *testing.T) {
	cfg := driver.Config{URLs: []string{"amqp://h/"}}
	if err := checkConfig(&cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.MaxOutstanding != 1000 || cfg.ConfirmTimeout != 10*time.Second || cfg.DialTimeout != 30*time.Second {
		t.Fatalf("defaults %+v", cfg)
	}
	for _, bad := range []driver.Config{{}, {URLs: []string{"http://h/"}}, {URLs: []string{"amqp://u:pw@h:port/"}}} {
		if err := checkConfig(&bad); err == nil {
			t.Errorf("%v accepted", bad.URLs)
		}
	}
}

func TestConnectionName(t *testing.T) {
	testenv.AMQPURL(t)
	testenv.RequireCtl(t)
	name := uniqueName("name")
	c := openTest(t, func(cfg *driver.Config) { cfg.Name = name })
	if err := c.Ping(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	out, err := testenv.Ctl("list_connections", "client_properties")
	if err != nil {
		t.Fatalf("%v", err)
	}
	if !strings.Contains(out, name) || !strings.Contains(out, Product) {
		t.Fatalf("connection %q (product %q) not listed:\n%s", name, Product, out)
	}
}

func TestCheckSendableNamesTheLongProperty(t *testing.T) {
	long := strings.Repeat("p", 256)
	for name, pub := range map[string]amqp.Publishing{
		"content-type":     {ContentType: long},
		"content-encoding": {ContentEncoding: long},
		"correlation-id":   {CorrelationId: long},
		"reply-to":         {ReplyTo: long},
		"expiration":       {Expiration: long},
		"message-id":       {MessageId: long},
		"type":             {Type: long},
		"user-id":          {UserId: long},
		"app-id":           {AppId: long},
	} {
		err := checkSendable(&pub, 0)
		if !errors.Is(err, ErrUnsendable) || !strings.Contains(err.Error(), "its "+name+" is 256 bytes") {
			t.Errorf("%s of 256 bytes: %v", name, err)
		}
	}
	ok := amqp.Publishing{ContentType: strings.Repeat("p", 255), MessageId: "m"}
	if err := checkSendable(&ok, 0); err != nil {
		t.Errorf("a property of 255 bytes: %v", err)
	}
	// 14 bytes of content header, 1+255 and 1+1 of properties.
	if err := checkSendable(&ok, 14+256+2+frameOverhead); err != nil {
		t.Errorf("a header of exactly one frame: %v", err)
	}
	if err := checkSendable(&ok, 14+256+2+frameOverhead-1); !errors.Is(err, ErrUnsendable) {
		t.Errorf("a header one byte over the frame: %v", err)
	}
}

// TestCheckSendableCountsEveryProperty: the content header's size counts
// each short-string property set (a length octet and its bytes) and none
// left empty, so a header of exactly one frame passes and one byte more is
// refused.
func TestCheckSendableCountsEveryProperty(t *testing.T) {
	all := amqp.Publishing{ContentType: "a", ContentEncoding: "bb", CorrelationId: "ccc", ReplyTo: "dddd",
		Expiration: "5", MessageId: "ffffff", Type: "g", UserId: "hh", AppId: "iii", DeliveryMode: amqp.Persistent}
	// 14 bytes of content header, 9 length octets, 23 bytes of
	// properties, 1 of delivery mode.
	exact := 14 + 9 + 23 + 1 + frameOverhead
	if err := checkSendable(&all, exact); err != nil {
		t.Errorf("every property, exactly one frame: %v", err)
	}
	if err := checkSendable(&all, exact-1); !errors.Is(err, ErrUnsendable) {
		t.Errorf("every property, one byte over the frame: %v", err)
	}
	some := amqp.Publishing{ContentType: "a", MessageId: "ffffff"}
	if err := checkSendable(&some, 14+2+7+frameOverhead); err != nil {
		t.Errorf("two properties, exactly one frame: %v", err)
	}
	if err := checkSendable(&some, 14+2+7+frameOverhead-1); !errors.Is(err, ErrUnsendable) {
		t.Errorf("two properties, one byte over the frame: %v", err)
	}
}
