package wire

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
		ok   bool
	}{
		{"order.placed", "order.placed", true},
		{[]byte("order.placed"), "order.placed", true},
		{"", "", false},
		{[]byte{}, "", false},
		{[]byte(nil), "", false},
		{[]byte{0xff, 0xfe}, "", false},
		{[]byte("caf\xc3"), "", false},
		{"h\xffllo", "h\xffllo", true}, // a Go string is taken as it came
		{nil, "", false},
		{42, "", false},
		{true, "", false},
		{3.5, "", false},
		{map[string]any{"a": "b"}, "", false},
	} {
		got, ok := String(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("String(%#v) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestInt(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want int64
		ok   bool
	}{
		{int(7), 7, true},
		{int8(-8), -8, true},
		{int16(300), 300, true},
		{int32(math.MaxInt32), math.MaxInt32, true},
		{int64(1767323045678), 1767323045678, true},
		{int64(math.MinInt64), math.MinInt64, true},
		{uint(9), 9, true},
		{uint8(255), 255, true},
		{uint16(65535), 65535, true},
		{uint32(math.MaxUint32), math.MaxUint32, true},
		{uint64(math.MaxInt64), math.MaxInt64, true},
		{uint64(math.MaxInt64 + 1), 0, false},
		{uint64(math.MaxUint64), 0, false},
		{float64(2), 2, true},
		{float64(1767323045678), 1767323045678, true},
		{float64(-3), -3, true},
		{float64(2.5), 0, false},
		{math.NaN(), 0, false},
		{math.Inf(1), 0, false},
		{math.Inf(-1), 0, false},
		{float64(1 << 63), 0, false}, // 2^63 does not fit an int64
		{float64(-(1 << 63)), math.MinInt64, true},
		{float64(1e300), 0, false},
		{float32(4), 4, true},
		{float32(0.25), 0, false},
		{"2", 2, true},
		{" 42 ", 42, true},
		{"+5", 5, true},
		{"-5", -5, true},
		{"1767323045678", 1767323045678, true},
		{"9223372036854775808", 0, false},
		{"2.0", 0, false},
		{"0x10", 0, false},
		{"", 0, false},
		{"  ", 0, false},
		{"two", 0, false},
		{[]byte("3"), 3, true},
		{[]byte{'3', 0xff}, 0, false},
		{true, 0, false},
		{false, 0, false},
		{nil, 0, false},
		{time.Unix(1, 0), 0, false},
		{[]any{1}, 0, false},
	} {
		got, ok := Int(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Int(%#v) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// TestInteger: every Go integer width reads as itself; floats, strings and
// bytes, which Int would read, are not integers to Integer.
func TestInteger(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want int64
		ok   bool
	}{
		{int(7), 7, true},
		{int8(-8), -8, true},
		{int16(300), 300, true},
		{int32(math.MinInt32), math.MinInt32, true},
		{int64(math.MaxInt64), math.MaxInt64, true},
		{uint(9), 9, true},
		{uint8(255), 255, true},
		{uint16(65535), 65535, true},
		{uint32(math.MaxUint32), math.MaxUint32, true},
		{uint64(math.MaxInt64), math.MaxInt64, true},
		{uint64(math.MaxInt64 + 1), 0, false},
		{float64(2), 0, false},
		{float32(4), 0, false},
		{"2", 0, false},
		{[]byte("3"), 0, false},
		{true, 0, false},
		{nil, 0, false},
	} {
		got, ok := Integer(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Integer(%#v) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzWireInt checks Int against independent statements of its rules for
// decimal strings (as string and as bytes), every integer width and floats.
func FuzzWireInt(f *testing.F) {
	f.Add("2", int64(2), 2.0)
	f.Add(" -17 ", int64(-17), -17.5)
	f.Add("9223372036854775807", int64(math.MaxInt64), 9.223372036854775807e18)
	f.Add("-9223372036854775808", int64(math.MinInt64), -9.223372036854775808e18)
	f.Add("1767323045678", int64(1767323045678), 1.767323045678e12)
	f.Add("\xff1", int64(-1), math.NaN())
	f.Add("", int64(0), math.Inf(1))
	f.Add("1e3", int64(1<<40), 0.1)
	f.Fuzz(func(t *testing.T, s string, i int64, fl float64) {
		// Decimal strings.
		n, ok := Int(s)
		want, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if ok != (err == nil) || (ok && n != want) {
			t.Errorf("Int(%q) = %d, %v; ParseInt says %d, %v", s, n, ok, want, err)
		}
		bn, bok := Int([]byte(s))
		if utf8.ValidString(s) {
			if bn != n || bok != ok {
				t.Errorf("Int([]byte(%q)) = %d, %v; Int(string) = %d, %v", s, bn, bok, n, ok)
			}
		} else if bok {
			t.Errorf("Int of invalid UTF-8 bytes %q = %d, true", s, bn)
		}

		// Every width reads the value it holds.
		check := func(v any, want int64, wantOK bool) {
			t.Helper()
			if got, ok := Int(v); got != want || ok != wantOK {
				t.Errorf("Int(%T %v) = %d, %v; want %d, %v", v, v, got, ok, want, wantOK)
			}
		}
		check(i, i, true)
		check(int(i), i, true)
		check(int32(i), int64(int32(i)), true)
		check(int16(i), int64(int16(i)), true)
		check(int8(i), int64(int8(i)), true)
		check(uint8(i), int64(uint8(i)), true)
		check(uint16(i), int64(uint16(i)), true)
		check(uint32(i), int64(uint32(i)), true)
		if i >= 0 {
			check(uint64(i), i, true)
		} else {
			check(uint64(i), 0, false) // above MaxInt64
		}
		check(strconv.FormatInt(i, 10), i, true)

		// Floats: whole numbers in range read as themselves, exactly.
		fn, fok := Int(fl)
		whole := !math.IsNaN(fl) && !math.IsInf(fl, 0) && fl == math.Trunc(fl) && fl >= -(1<<63) && fl < 1<<63
		if fok != whole {
			t.Errorf("Int(%v) ok = %v, want %v", fl, fok, whole)
		}
		if fok && float64(fn) != fl {
			t.Errorf("Int(%v) = %d, which is not the same number", fl, fn)
		}
		f32 := float32(fl)
		if n32, ok32 := Int(f32); ok32 && float32(n32) != f32 {
			t.Errorf("Int(float32 %v) = %d", f32, n32)
		}
	})
}

// FuzzWireString checks String for strings and byte slices: a non-empty
// string is itself, bytes are read only when they are non-empty UTF-8.
func FuzzWireString(f *testing.F) {
	for _, s := range []string{"", "order.placed", "\xff\xfe", "caf\xc3", "héllo", "\x00", strings.Repeat("a", 300)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, ok := String(b)
		if wantOK := len(b) > 0 && utf8.Valid(b); ok != wantOK || (ok && s != string(b)) || (!ok && s != "") {
			t.Errorf("String(%q bytes) = %q, %v", b, s, ok)
		}
		s, ok = String(string(b))
		if ok != (len(b) > 0) || s != string(b) {
			t.Errorf("String(%q) = %q, %v", b, s, ok)
		}
	})
}
