package wire

import (
	"errors"
	"os"
	"reflect"
	"strings"
)

// Fatal marks an error that retrying cannot fix. Package acemq's Fatal
// returns one; IsFatal looks for it.
type Fatal struct{ Err error }

// Error is the marked error's text.
func (f *Fatal) Error() string { return f.Err.Error() }

// Unwrap returns the marked error.
func (f *Fatal) Unwrap() error { return f.Err }

// Unmark returns err without any Fatal wrappers around it.
func Unmark(err error) error {
	for {
		f, ok := err.(*Fatal)
		if !ok || f.Err == nil {
			return err
		}
		err = f.Err
	}
}

// genericError is the readable name of the standard library's unnamed
// error types (errors.New, fmt.Errorf, errors.Join), whose Go type names
// (errorString, wrapError, …) mean nothing to an operator.
const genericError = "Error"

// TypeName is the name the family writes for err's type in reasons: the
// concrete type without pointer or package qualifier (for example
// "PathError" or "PanicError"), or "Error" for an error made by
// errors.New, fmt.Errorf or errors.Join. It is "" for a nil error.
func TypeName(err error) string {
	if err == nil {
		return ""
	}
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.PkgPath() + "." + t.Name() {
	case "errors.errorString", "errors.joinError", "fmt.wrapError", "fmt.wrapErrors":
		return genericError
	}
	name := t.Name()
	if name == "" { // an unnamed type: use its rendering, unqualified
		name = t.String()
		name = name[strings.LastIndexByte(name, '.')+1:]
	}
	return name
}

// Describe renders err as the family writes causes: "TypeName: message",
// looking through Fatal wrappers to the error they mark. It is "" for a
// nil error.
func Describe(err error) string {
	if err == nil {
		return ""
	}
	err = Unmark(err)
	return TypeName(err) + ": " + err.Error()
}

// IsFatal reports whether err, or an error it wraps, is marked Fatal.
func IsFatal(err error) bool {
	var f *Fatal
	return errors.As(err, &f)
}

// DefaultOrigin is acemq@{hostname}, with "unknown-host" when the host name
// cannot be read: the origin a connection stamps on messages published
// without one.
func DefaultOrigin() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "unknown-host"
	}
	return "acemq@" + h
}
