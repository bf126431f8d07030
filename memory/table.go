package memory

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
)

// cloneTable deep-copies a field table: nested tables, arrays and byte
// slices are copied so that neither side can change the other's values.
func cloneTable(t driver.Table) driver.Table {
	if t == nil {
		return nil
	}
	out := make(driver.Table, len(t))
	for k, v := range t {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case []byte:
		if x == nil {
			return x
		}
		return bytes.Clone(x)
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i := range x {
			out[i] = cloneValue(x[i])
		}
		return out
	case driver.Table:
		return cloneTable(x)
	default:
		return v
	}
}

// validateTable checks that every value in t is one the driver package
// allows in a field table, so that a message that would fail to encode on a
// real broker fails here too. what names the table in the error.
func validateTable(what string, t driver.Table) error {
	keys := sortedKeys(t)
	for _, k := range keys {
		if err := validateValue(t[k]); err != nil {
			return fmt.Errorf("memory: %s %q: %w", what, k, err)
		}
	}
	return nil
}

func validateValue(v any) error {
	switch x := v.(type) {
	case nil, string, []byte, bool, int8, int16, int32, int64, uint8, uint16, uint32,
		float32, float64, time.Time, driver.Decimal:
		return nil
	case []any:
		for i, e := range x {
			if err := validateValue(e); err != nil {
				return fmt.Errorf("array element %d: %w", i, err)
			}
		}
		return nil
	case driver.Table:
		for _, k := range sortedKeys(x) {
			if err := validateValue(x[k]); err != nil {
				return fmt.Errorf("nested field %q: %w", k, err)
			}
		}
		return nil
	case int, uint, uint64:
		return fmt.Errorf("a %T cannot be carried in an AMQP field table; use int32 or int64", v)
	default:
		return fmt.Errorf("a %T cannot be carried in an AMQP field table", v)
	}
}

func sortedKeys(t driver.Table) []string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// equalValues compares two field values the way RabbitMQ compares
// declaration arguments: integers of every width are one type class, and
// so are floats; everything else must match in type and value.
func equalValues(a, b any) bool {
	if ai, ok := wire.Integer(a); ok {
		bi, ok := wire.Integer(b)
		return ok && ai == bi
	}
	if af, ok := asFloat(a); ok {
		bf, ok := asFloat(b)
		return ok && af == bf
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case driver.Decimal:
		y, ok := b.(driver.Decimal)
		return ok && x == y
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case driver.Table:
		y, ok := b.(driver.Table)
		return ok && equalTables(x, y)
	}
	return false
}

func equalTables(a, b driver.Table) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !equalValues(av, bv) {
			return false
		}
	}
	return true
}

// typeName is RabbitMQ's name for the AMQP type a Go value is sent as.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "void"
	case string:
		return "longstr"
	case []byte:
		return "binary"
	case bool:
		return "bool"
	case int8:
		return "byte"
	case uint8:
		return "unsignedbyte"
	case int16:
		return "short"
	case uint16:
		return "unsignedshort"
	case int32:
		return "signedint"
	case uint32:
		return "unsignedint"
	case int64, int, uint, uint64:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case time.Time:
		return "timestamp"
	case driver.Decimal:
		return "decimal"
	case []any:
		return "array"
	case driver.Table:
		return "table"
	}
	return fmt.Sprintf("%T", v)
}

func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case time.Time:
		return strconv.FormatInt(x.Unix(), 10)
	case driver.Decimal:
		return fmt.Sprintf("{decimal,%d,%d}", x.Scale, x.Value)
	}
	return fmt.Sprint(v)
}

// describeArg renders an argument as RabbitMQ does in an inequivalence
// message: "none" or "the value '200' of type 'long'".
func describeArg(v any, present bool) string {
	if !present {
		return "none"
	}
	return fmt.Sprintf("the value '%s' of type '%s'", formatValue(v), typeName(v))
}

// compareArgs returns RabbitMQ's PRECONDITION_FAILED text for the first
// argument (in name order) that differs between a declaration and what
// exists, or "" when they are equivalent. defaults supply the value an
// absent argument stands for (x-queue-type: classic).
func compareArgs(kind, name string, current, received driver.Table, defaults map[string]any) string {
	seen := map[string]bool{}
	var keys []string
	for _, t := range []driver.Table{current, received} {
		for k := range t {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		cv, cok := current[k]
		rv, rok := received[k]
		if d, ok := defaults[k]; ok {
			if !cok {
				cv, cok = d, true
			}
			if !rok {
				rv, rok = d, true
			}
		}
		if cok == rok && equalValues(cv, rv) {
			continue
		}
		return fmt.Sprintf("inequivalent arg '%s' for %s '%s' in vhost '/': received %s but current is %s",
			k, kind, name, describeArg(rv, rok), describeArg(cv, cok))
	}
	return ""
}

// fieldMismatch renders RabbitMQ's text for a differing declaration field.
func fieldMismatch(field, kind, name string, received, current any) string {
	return fmt.Sprintf("inequivalent arg '%s' for %s '%s' in vhost '/': received '%v' but current is '%v'",
		field, kind, name, received, current)
}
