// Package field holds what an AMQP 0-9-1 field table carries: the rule
// package acemq checks header values by and package topology checks
// declaration arguments by, so that both accept and convert the same values.
package field

import (
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/acemq/acemq/driver"
)

// ValueError is a value an AMQP field table cannot carry; package
// acemq's HeaderValueError has the same fields and is converted from it.
type ValueError struct {
	Name, Path string
	Type       string
	Why        string
}

// Value returns v in the form an AMQP field table carries it (package
// acemq's header values, package topology's arguments; docs/envelope.md
// lists the accepted types), copied where it is mutable. name and path
// locate v for the error.
func Value(v any, name, path string) (any, *ValueError) {
	switch x := v.(type) {
	case nil, string, bool, int8, int16, int32, int64, uint8, uint16, uint32,
		float32, float64, time.Time, driver.Decimal:
		return v, nil
	case int:
		return int64(x), nil
	case uint:
		return unsigned(uint64(x), name, path, "uint")
	case uint64:
		return unsigned(x, name, path, "uint64")
	case []byte:
		if x == nil {
			return x, nil
		}
		return append([]byte{}, x...), nil
	case []any:
		if x == nil {
			return x, nil
		}
		out := make([]any, len(x))
		for i, e := range x {
			ce, err := Value(e, name, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = ce
		}
		return out, nil
	case map[string]any:
		if x == nil {
			return x, nil
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			ce, err := Value(e, name, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = ce
		}
		return out, nil
	}
	return fieldValueReflect(reflect.ValueOf(v), name, path)
}

func unsigned(n uint64, name, path, typ string) (any, *ValueError) {
	if n > math.MaxInt64 {
		return nil, &ValueError{Name: name, Path: path, Type: typ,
			Why: fmt.Sprintf("%d is above the largest AMQP integer, %d; send it as a string", n, int64(math.MaxInt64))}
	}
	return int64(n), nil
}

// fieldValueReflect converts values of other types: named scalars, typed
// slices and arrays, maps with string keys.
func fieldValueReflect(rv reflect.Value, name, path string) (any, *ValueError) {
	switch rv.Kind() {
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Int8:
		return int8(rv.Int()), nil
	case reflect.Int16:
		return int16(rv.Int()), nil
	case reflect.Int32:
		return int32(rv.Int()), nil
	case reflect.Int, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint8:
		return uint8(rv.Uint()), nil
	case reflect.Uint16:
		return uint16(rv.Uint()), nil
	case reflect.Uint32:
		return uint32(rv.Uint()), nil
	case reflect.Uint, reflect.Uint64:
		return unsigned(rv.Uint(), name, path, rv.Type().String())
	case reflect.Float32:
		return float32(rv.Float()), nil
	case reflect.Float64:
		return rv.Float(), nil
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return []any(nil), nil
		}
		if rv.Type().Elem().Kind() == reflect.Uint8 { // a named byte slice
			b := make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
			return b, nil
		}
		out := make([]any, rv.Len())
		for i := range rv.Len() {
			ce, err := Value(rv.Index(i).Interface(), name, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = ce
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		if rv.IsNil() {
			return map[string]any(nil), nil
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			k := it.Key().String()
			ce, err := Value(it.Value().Interface(), name, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = ce
		}
		return out, nil
	}
	typ := "nil interface"
	if rv.IsValid() {
		typ = rv.Type().String()
	}
	return nil, &ValueError{Name: name, Path: path, Type: typ}
}

// Table copies args (a declaration's or a subscription's arguments)
// with every value in the form a header value takes (Go int and uint values, which have no AMQP width, become int64),
// or reports the first that AMQP cannot carry.
func Table(args map[string]any) (driver.Table, error) {
	if args == nil {
		return nil, nil
	}
	out := make(driver.Table, len(args))
	for k, v := range args {
		cv, err := Value(v, k, "")
		if err != nil {
			return nil, fmt.Errorf("the argument %q holds a %s, which AMQP cannot carry", k, err.Type)
		}
		out[k] = cv
	}
	return out, nil
}
