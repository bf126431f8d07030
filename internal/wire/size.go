package wire

import (
	"math"
	"time"
)

// ScalarSize is the encoded size of v as an AMQP 0-9-1 field-table value,
// its type octet included, when v is a scalar that amqp091-go writes as it
// is: a string or []byte (4-byte length and the bytes), bool, int8, uint8,
// int16, uint16, int32, uint32, int64, a finite float32 or float64,
// time.Time (8 bytes) or nil. For anything else — nested tables and
// arrays, decimals, a NaN or an infinity (no AMQP peer reads them back),
// other Go types — ok is false. The publisher (adding up a table's size as
// it writes it) and the RabbitMQ driver (checking a table it was given)
// both count with it, so they agree.
func ScalarSize(v any) (n int, ok bool) {
	switch x := v.(type) {
	case string:
		return 5 + len(x), true
	case []byte:
		return 5 + len(x), true
	case int32, uint32:
		return 5, true
	case int64, time.Time:
		return 9, true
	case nil:
		return 1, true
	case bool, int8, uint8:
		return 2, true
	case int16, uint16:
		return 3, true
	case float32:
		f := float64(x)
		return 5, !math.IsNaN(f) && !math.IsInf(f, 0)
	case float64:
		return 9, !math.IsNaN(x) && !math.IsInf(x, 0)
	}
	return 0, false
}
