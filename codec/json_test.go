package codec_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
)

// JSON makes the JSON codec with other bounds, refusing what is over them
// as acemq.JSON refuses what is over its own (TestJSONLimits in package
// acemq).
func TestJSONBounds(t *testing.T) {
	var v any
	c := codec.JSON(codec.WithMaxBodySize(10), codec.WithMaxDepth(2))
	if err := c.Decode([]byte(`[[1]]`), "application/json", &v); err != nil {
		t.Fatal(err)
	}
	if err := c.Decode([]byte(`[[[1]]]`), "application/json", &v); !errors.Is(err, acemq.ErrTooDeep) {
		t.Fatalf("WithMaxDepth(2): %v", err)
	}
	if err := c.Decode([]byte(`"0123456789"`), "application/json", &v); !errors.Is(err, acemq.ErrTooLarge) {
		t.Fatalf("WithMaxBodySize(10): %v", err)
	}
	// A bound of zero or less is a mistake, refused at start-up.
	for _, o := range []codec.JSONOption{codec.WithMaxBodySize(0), codec.WithMaxDepth(-1)} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "codec: JSON needs positive bounds") {
					t.Errorf("JSON with a bound <= 0: recovered %v", r)
				}
			}()
			codec.JSON(o)
		}()
	}
}
