package rabbitmq

import (
	"fmt"
	"math"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

// toAMQPTable converts a driver table to an amqp091 table. When every value
// is already acceptable to amqp091 (the common case: flat headers of scalar
// values) the map is reused as is, without copying.
func toAMQPTable(t driver.Table) (amqp.Table, error) {
	if t == nil {
		return nil, nil
	}
	if !tableNeedsConversion(t) {
		return amqp.Table(t), nil
	}
	out := make(amqp.Table, len(t))
	for k, v := range t {
		cv, err := toAMQPValue(v)
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", k, err)
		}
		out[k] = cv
	}
	return out, nil
}

// flatTable is toAMQPTable and tableSize in one walk over t, for the
// common case of a publish's headers: a table of scalars amqp091 takes as
// they are, within AMQP's limits. It returns t as an amqp091 table and its
// encoded size (length prefix included), or ok false for anything else
// (a nested table or array, a value to convert or refuse, a name longer
// than 255 bytes, a NaN or infinite float, too many entries): then
// toAMQPTable and checkSendable walk it and say what is wrong.
func flatTable(t driver.Table) (at amqp.Table, size int, ok bool) {
	if len(t) > maxContainerElements {
		return nil, 0, false
	}
	size = 4
	for k, v := range t {
		n, ok := scalarSize(v)
		if !ok || len(k) > 255 {
			return nil, 0, false
		}
		size += 1 + len(k) + n
	}
	return amqp.Table(t), size, true
}

// scalarSize is fieldSize for a scalar amqp091 encodes as it is, or false:
// wire.ScalarSize's scalars (what acemq's publishers count too), and the
// two amqp091 also takes as they are, int (as a 32-bit integer) and
// amqp.Decimal.
func scalarSize(v any) (int, bool) {
	switch v.(type) {
	case int:
		return 5, true
	case amqp.Decimal:
		return 6, true
	}
	return wire.ScalarSize(v)
}

// tableNeedsConversion reports whether t holds a value that amqp091 does
// not accept as it is.
func tableNeedsConversion(t map[string]any) bool {
	for _, v := range t {
		if valueNeedsConversion(v) {
			return true
		}
	}
	return false
}

func valueNeedsConversion(v any) bool {
	switch x := v.(type) {
	case nil, bool, uint8, int8, int16, int32, int64, int, uint16, uint32,
		float32, float64, string, []byte, amqp.Decimal, time.Time:
		return false
	case amqp.Table:
		return tableNeedsConversion(x)
	case []any:
		for _, e := range x {
			if valueNeedsConversion(e) {
				return true
			}
		}
		return false
	default:
		// driver.Table, driver.Decimal, uint, uint64 and
		// anything unsupported go through toAMQPValue.
		return true
	}
}

func toAMQPValue(v any) (any, error) {
	switch x := v.(type) {
	case driver.Table:
		return toAMQPTable(x)
	case amqp.Table:
		return toAMQPTable(driver.Table(x))
	case driver.Decimal:
		return amqp.Decimal{Scale: x.Scale, Value: x.Value}, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			ce, err := toAMQPValue(e)
			if err != nil {
				return nil, fmt.Errorf("array element %d: %w", i, err)
			}
			out[i] = ce
		}
		return out, nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return nil, fmt.Errorf("value %d does not fit an AMQP signed 64-bit integer", x)
		}
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return nil, fmt.Errorf("value %d does not fit an AMQP signed 64-bit integer", x)
		}
		return int64(x), nil
	}
	if err := (amqp.Table{"v": v}).Validate(); err != nil {
		return nil, fmt.Errorf("a %T cannot be sent in an AMQP field table", v)
	}
	return v, nil
}

// fromAMQPTable converts a table read off the wire to a driver table:
// nested tables become driver.Table, decimals driver.Decimal, and arrays are
// converted element by element. A flat table of scalars is reused without
// copying.
func fromAMQPTable(t amqp.Table) driver.Table {
	if t == nil {
		return nil
	}
	if !fromNeedsConversion(t) {
		return driver.Table(t)
	}
	out := make(driver.Table, len(t))
	for k, v := range t {
		out[k] = fromAMQPValue(v)
	}
	return out
}

func fromNeedsConversion(t amqp.Table) bool {
	for _, v := range t {
		switch v.(type) {
		case amqp.Table, amqp.Decimal, []any:
			return true
		}
	}
	return false
}

func fromAMQPValue(v any) any {
	switch x := v.(type) {
	case amqp.Table:
		return fromAMQPTable(x)
	case amqp.Decimal:
		return driver.Decimal{Scale: x.Scale, Value: x.Value}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromAMQPValue(e)
		}
		return out
	}
	return v
}
