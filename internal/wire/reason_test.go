package wire

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

type codedError struct{ code int }

func (e codedError) Error() string { return fmt.Sprintf("code %d", e.code) }

func TestTypeName(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("out of stock"), "Error"},
		{fmt.Errorf("order %s: %w", "o-1", errors.New("out of stock")), "Error"},
		{fmt.Errorf("two: %w, %w", errors.New("a"), errors.New("b")), "Error"},
		{errors.Join(errors.New("a"), errors.New("b")), "Error"},
		{&fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}, "PathError"},
		{codedError{7}, "codedError"},
		{&Fatal{Err: errors.New("x")}, "Fatal"},
	} {
		if got := TypeName(tc.err); got != tc.want {
			t.Errorf("TypeName(%T) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("out of stock"), "Error: out of stock"},
		{&Fatal{Err: &Fatal{Err: codedError{3}}}, "codedError: code 3"},
		{&Fatal{Err: errors.New("bad order")}, "Error: bad order"},
	} {
		if got := Describe(tc.err); got != tc.want {
			t.Errorf("Describe(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if !IsFatal(fmt.Errorf("wrapped: %w", &Fatal{Err: errors.New("x")})) || IsFatal(errors.New("x")) {
		t.Error("IsFatal does not look through wrapping, or sees a mark that is not there")
	}
}
