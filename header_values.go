package acemq

import (
	"fmt"
	"sort"

	"github.com/acemq/acemq/internal/field"
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
		switch v.(type) {
		case string, int32, int64, bool:
			// Held as they are (field.Value): the common values, without
			// the call.
		default:
			cv, err := headerValue(v, k, "")
			if err != nil {
				if first == nil || k < first.Name {
					first = err
				}
				continue
			}
			v = cv
		}
		out = append(out, header{k, v})
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
	cv, err := field.Value(v, name, path)
	return cv, (*HeaderValueError)(err)
}
