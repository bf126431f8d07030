package acemq

import (
	"math"
	"time"
)

// tableSize adds up the encoded size of an AMQP 0-9-1 field table as its
// entries are written, for driver.Message.HeaderSize: a 4-byte length,
// then per entry a short string name (one length octet and the bytes) and
// a typed value (one type octet and the value's bytes). It stays valid only
// while every value is a flat scalar (flatFieldSize) and every name fits a
// short string; otherwise size is 0, "unknown", and the driver measures
// the table itself. The zero value is an empty table.
type tableSize struct {
	n      int
	failed bool
}

func (t *tableSize) fail() { t.failed = true }

// add counts the entry name = v.
func (t *tableSize) add(name string, v any) {
	n, ok := flatFieldSize(v)
	if !ok || len(name) > 255 {
		t.failed = true
		return
	}
	t.n += 1 + len(name) + n
}

// addString counts the entry name = s, a long string.
func (t *tableSize) addString(name, s string) { t.n += 1 + len(name) + 5 + len(s) }

// addFixed counts the entry name = a value of n bytes (an int32's 4, an
// int64's 8).
func (t *tableSize) addFixed(name string, n int) { t.n += 1 + len(name) + 1 + n }

// size is the table's encoded size, length prefix included, or 0.
func (t *tableSize) size() int {
	if t.failed {
		return 0
	}
	return 4 + t.n
}

// flatFieldSize is the encoded size of v as a field value, its type octet
// included, when v is a scalar an AMQP driver writes as it is: a string or
// []byte (4-byte length and the bytes), bool, int8, uint8, int16, uint16,
// int32, uint32, int64, a finite float32 or float64, time.Time (8 bytes)
// or nil. Anything else (nested tables and arrays, decimals, a NaN or an
// infinity, which no AMQP peer reads back) is not flat: false.
func flatFieldSize(v any) (int, bool) {
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
