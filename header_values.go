package acemq

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
)

// Application header values are checked when an envelope is built, so that
// a value AMQP cannot carry is refused there, naming the header, rather
// than at Send. The accepted Go types are those of an AMQP 0-9-1 field
// table (docs/envelope.md lists them):
//
//	nil, string, []byte, bool, int8, int16, int32, int64, uint8, uint16,
//	uint32, float32, float64, time.Time, driver.Decimal,
//	[]any of those and map[string]any of those (nested tables)
//
// and, converted on the way in: int and uint (to int64; a uint above
// math.MaxInt64 is refused), uint64 likewise, a value of a named type
// whose underlying type is one of the scalars above (to that type), a
// slice or array of any other element type (to []any) and a map with
// string keys of any other value type (to map[string]any).

// HeaderValueError reports an application header whose value cannot travel
// in an AMQP field table. Nothing was built or sent.
type HeaderValueError struct {
	// Name is the header; Path locates the value inside it when it is
	// nested ("[2]" for an array element, ".k" for a table entry).
	Name, Path string
	// Type is the value's Go type.
	Type string
	// Why says what is wrong when the type itself is accepted (a uint64
	// too large for AMQP's signed 64-bit integers).
	Why string
}

// Error names the header and the type, and says what to use instead.
func (e *HeaderValueError) Error() string {
	where := fmt.Sprintf("the header %q", e.Name)
	if e.Path != "" {
		where += " at " + e.Path
	}
	if e.Why != "" {
		return fmt.Sprintf("%s holds a %s that AMQP cannot carry: %s", where, e.Type, e.Why)
	}
	return fmt.Sprintf("%s holds a %s, which an AMQP header cannot carry: use a string, a number, a bool, []byte, time.Time, or a []any or map[string]any of those", where, e.Type)
}

// checkHeaders returns a deep copy of h, as a list by name, with every
// value in its accepted form (nil when h is empty), or a *ReservedHeaderError naming every
// reserved name, or a *HeaderValueError for the first value (in name order)
// that cannot be carried.
func checkHeaders(h map[string]any) (headerList, error) {
	if len(h) == 0 {
		return nil, nil
	}
	var bad []string
	var first *HeaderValueError
	out := make(headerList, 0, len(h))
	for k, v := range h {
		if wire.IsReserved(k) {
			bad = append(bad, k)
			continue
		}
		cv, err := headerValue(v, k, "")
		if err != nil {
			if first == nil || k < first.Name {
				first = err
			}
			continue
		}
		out = append(out, header{k, cv})
	}
	if bad != nil {
		sort.Strings(bad)
		return nil, &ReservedHeaderError{Names: bad}
	}
	if first != nil {
		return nil, first
	}
	out.sort()
	return out, nil
}

// headerValue returns v in its accepted form, copied where it is mutable.
func headerValue(v any, name, path string) (any, *HeaderValueError) {
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
			ce, err := headerValue(e, name, fmt.Sprintf("%s[%d]", path, i))
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
			ce, err := headerValue(e, name, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = ce
		}
		return out, nil
	}
	return headerValueReflect(reflect.ValueOf(v), name, path)
}

func unsigned(n uint64, name, path, typ string) (any, *HeaderValueError) {
	if n > math.MaxInt64 {
		return nil, &HeaderValueError{Name: name, Path: path, Type: typ,
			Why: fmt.Sprintf("%d is above the largest AMQP integer, %d; send it as a string", n, int64(math.MaxInt64))}
	}
	return int64(n), nil
}

// headerValueReflect converts values of other types: named scalars, typed
// slices and arrays, maps with string keys.
func headerValueReflect(rv reflect.Value, name, path string) (any, *HeaderValueError) {
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
			ce, err := headerValue(rv.Index(i).Interface(), name, fmt.Sprintf("%s[%d]", path, i))
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
			ce, err := headerValue(it.Value().Interface(), name, path+"."+k)
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
	return nil, &HeaderValueError{Name: name, Path: path, Type: typ}
}
