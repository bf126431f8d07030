// Package nesting measures how deeply a text body nests, in one linear pass
// that allocates nothing, so that a codec can refuse a body nested too
// deeply before a parser whose cost grows with depth reads it.
//
// Each scanner counts the brackets that open a nested value and skips the
// places where a bracket is only text (strings, and comments where the
// format has them). It answers only "deeper than max or not"; it does not
// validate: a malformed body within the bound is left to the parser.
package nesting

import (
	"bytes"
	"errors"
)

// ErrTooDeep is acemq.ErrTooDeep, here so that the internal readers that
// refuse deep input (internal/headerjson) wrap the same sentinel.
var ErrTooDeep = errors.New("nested too deeply")

// JSON reports whether body, read as JSON, nests arrays and objects more
// than max deep. Brackets inside strings do not count.
func JSON(body []byte, max int) bool {
	// Nesting deeper than max takes more than max opening brackets. Most
	// bodies have far fewer, which two counts (many bytes at a time) tell
	// without the byte-by-byte scan.
	if bytes.Count(body, openBracket)+bytes.Count(body, openBrace) <= max {
		return false
	}
	return jsonScan(body, max)
}

var openBracket, openBrace = []byte{'['}, []byte{'{'}

// jsonScan is JSON's scan, which skips the brackets inside strings.
func jsonScan(body []byte, max int) bool {
	depth := 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '"':
			i = skipDoubleQuoted(body, i+1)
		case '[', '{':
			depth++
			if depth > max {
				return true
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}

// skipDoubleQuoted returns the index of the quote that closes a string
// whose content starts at i (backslash escapes), or len(b) if none does.
func skipDoubleQuoted(b []byte, i int) int {
	for ; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(b)
}

// TOML reports whether body, read as TOML, nests tables and arrays more
// than max deep. Arrays and inline tables count one level per bracket; a
// dotted key (a.b.c = 1, [a.b.c]) one level per dot besides. A dot after
// a comma in an array (a float) is counted as if in a key: an
// overestimate of one level. Brackets and dots in strings (basic, literal
// and their multi-line forms) and comments do not count; a table header
// such as [a] or [[a]] counts while it is open.
func TOML(body []byte, max int) bool {
	depth, dots := 0, 0
	inKey := true
	for i := 0; i < len(body); i++ {
		switch c := body[i]; c {
		case '#':
			for i < len(body) && body[i] != '\n' {
				i++
			}
			inKey, dots = true, 0
		case '\n':
			inKey, dots = true, 0
		case '=':
			inKey, dots = false, 0
		case ',':
			inKey, dots = true, 0
		case '.':
			if inKey {
				dots++
			}
		case '"', '\'':
			if i+2 < len(body) && body[i+1] == c && body[i+2] == c {
				i = skipMultiline(body, i+3, c)
			} else {
				i = skipLine(body, i+1, c)
			}
		case '[', '{':
			depth++
			dots = 0
			if c == '{' {
				inKey = true
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
		if depth+dots > max {
			return true
		}
	}
	return false
}

// skipLine returns the index of the quote q that closes a one-line TOML
// string whose content starts at i, or of the newline that ends the line
// (such a string cannot span lines), or len(b). Only a basic string (")
// has backslash escapes.
func skipLine(b []byte, i int, q byte) int {
	for ; i < len(b); i++ {
		switch b[i] {
		case '\\':
			if q == '"' && i+1 < len(b) && b[i+1] != '\n' {
				i++
			}
		case q, '\n':
			return i
		}
	}
	return len(b)
}

// skipMultiline returns the index of the last quote closing a multi-line
// string (three double or three single quotes) whose content starts at i,
// or len(b) if none does.
func skipMultiline(b []byte, i int, q byte) int {
	for ; i < len(b); i++ {
		switch {
		case b[i] == '\\' && q == '"':
			i++
		case b[i] == q && i+2 < len(b) && b[i+1] == q && b[i+2] == q:
			// Up to two more quotes may close it ("""a"""" is the string a").
			j := i + 3
			for k := 0; k < 2 && j < len(b) && b[j] == q; k++ {
				j++
			}
			return j - 1
		}
	}
	return len(b)
}
