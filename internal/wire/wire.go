// Package wire converts header values read off the wire into the types the
// envelope needs, forgivingly: strings may arrive as bytes, integers in any
// width, as whole-number floats or as decimal strings.
package wire

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// String reads v as a string. []byte is decoded as UTF-8; invalid UTF-8,
// the empty string and any other type are unreadable (ok false).
func String(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, s != ""
	case []byte:
		if len(s) == 0 || !utf8.Valid(s) {
			return "", false
		}
		return string(s), true
	}
	return "", false
}

// Int reads v as an integer: any integer width, a float holding a whole
// number, or a decimal string (surrounding spaces allowed). Booleans,
// fractions, out-of-range values and anything else are unreadable.
func Int(v any) (int64, bool) {
	if n, ok := Integer(v); ok {
		return n, true
	}
	switch n := v.(type) {
	case float32:
		return whole(float64(n))
	case float64:
		return whole(n)
	case string:
		return parse(n)
	case []byte:
		if !utf8.Valid(n) {
			return 0, false
		}
		return parse(string(n))
	}
	return 0, false
}

// Integer reads v as an int64 when it has a Go integer type, of any width
// and signed or not; a uint or uint64 above math.MaxInt64 is unreadable.
// Unlike [Int] it takes nothing else: floats, strings and byte slices are
// not integers here, as a broker comparing declaration arguments sees it.
func Integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint:
		if uint64(n) > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

// twoTo63 is 2^63, the first float64 above every int64. math.MaxInt64
// converted to float64 rounds up to it, so comparing with MaxInt64 would
// let 2^63 through and overflow the conversion.
const twoTo63 = 1 << 63

func whole(f float64) (int64, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || f >= twoTo63 || f < -twoTo63 {
		return 0, false
	}
	return int64(f), true
}

func parse(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}
