package avro_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq/codec/avro"
)

// avroOnce fails t unless err begins with "avro: " and says it only once.
// With parsed, err ends with the text of the Avro library's error (whose
// package is named avro too, and says so): that tail is not counted.
func avroOnce(t *testing.T, what string, err error, parsed bool) {
	t.Helper()
	msg := err.Error()
	ours := msg
	if parsed {
		inner := err
		for errors.Unwrap(inner) != nil {
			inner = errors.Unwrap(inner)
		}
		if inner == err || !strings.HasSuffix(msg, inner.Error()) {
			t.Fatalf("%s = %q: does not end with the Avro library's error", what, msg)
		}
		ours = strings.TrimSuffix(msg, inner.Error())
	}
	if !strings.HasPrefix(msg, "avro: ") || strings.Count(ours, "avro: ") != 1 {
		t.Errorf("%s = %q: want it to begin with avro: and say it once", what, msg)
	}
}

// The registry's errors name package avro once, at their start, and wrap
// ErrConflict and ErrNotFound as documented.
func TestRegistryErrorsSayAvroOnce(t *testing.T) {
	ctx := context.Background()
	reg := avro.NewRegistry(avro.NewMemoryStore())
	if err := reg.Put(ctx, 7, `"string"`); err != nil {
		t.Fatal(err)
	}
	err := reg.Put(ctx, 7, `"long"`)
	if !errors.Is(err, avro.ErrConflict) {
		t.Fatalf("Put of another schema under a taken id = %v, want ErrConflict", err)
	}
	avroOnce(t, "Put of another schema under a taken id", err, false)
	_, err = reg.Schema(ctx, 8)
	if !errors.Is(err, avro.ErrNotFound) {
		t.Fatalf("Schema of an absent id = %v, want ErrNotFound", err)
	}
	avroOnce(t, "Schema of an absent id", err, false)
	_, err = reg.Register(ctx, `{"type": "nope"}`)
	if err == nil {
		t.Fatal("Register of a malformed schema succeeded")
	}
	avroOnce(t, "Register of a malformed schema", err, true)
	_, err = avro.NewFixed(`"string"`, avro.WithWriterSchema(`{"type": "nope"}`))
	if err == nil {
		t.Fatal("NewFixed with a malformed writer's schema succeeded")
	}
	avroOnce(t, "NewFixed with a malformed writer's schema", err, true)
}
