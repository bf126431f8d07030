package acemq

import "github.com/acemq/acemq/internal/wire"

// tableSize adds up the encoded size of an AMQP 0-9-1 field table as its
// entries are written, for driver.Message.HeaderSize: a 4-byte length,
// then per entry a short string name (one length octet and the bytes) and
// a typed value (one type octet and the value's bytes). It stays valid only
// while every value is a flat scalar (wire.ScalarSize) and every name fits a
// short string; otherwise size is 0, "unknown", and the driver measures
// the table itself. The zero value is an empty table.
type tableSize struct {
	n      int
	failed bool
}

func (t *tableSize) fail() { t.failed = true }

// add counts the entry name = v.
func (t *tableSize) add(name string, v any) {
	n, ok := wire.ScalarSize(v)
	if !ok || len(name) > 255 {
		t.failed = true
		return
	}
	t.n += 1 + len(name) + n
}

// value counts the entry name = v and returns v as a table written for
// the wire holds it: a copy of a mutable value (cloneValue), v itself
// otherwise. The immutable scalars an application header most often
// holds are counted and kept in one type switch, without the walk
// cloneValue and add each make.
func (t *tableSize) value(name string, v any) any {
	if len(name) <= 255 {
		switch x := v.(type) {
		case string:
			t.n += 1 + len(name) + 5 + len(x)
			return v
		case int32:
			t.n += 1 + len(name) + 5
			return v
		case int64:
			t.n += 1 + len(name) + 9
			return v
		case bool:
			t.n += 1 + len(name) + 2
			return v
		}
	}
	t.add(name, v)
	return cloneValue(v)
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
