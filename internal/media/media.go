// Package media compares content types the way docs/wire.md §4.4 says:
// on the media type alone, case-insensitively, ignoring parameters.
package media

import "strings"

// Type returns the lower-cased media type of a content type, without
// parameters or surrounding space ("" for an empty content type).
func Type(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// Matches reports whether the media type of ct is one of types (given in
// lower case) or ends in one of the structured-syntax suffixes (given as
// "+xml", "+yaml", …) after a subtype of at least one character. An empty
// content type matches nothing.
func Matches(ct string, types []string, suffixes []string) bool {
	mt := Type(ct)
	if mt == "" {
		return false
	}
	for _, t := range types {
		if mt == t {
			return true
		}
	}
	slash := strings.IndexByte(mt, '/')
	if slash <= 0 {
		return false
	}
	sub := mt[slash+1:]
	for _, s := range suffixes {
		if len(sub) > len(s) && strings.HasSuffix(sub, s) {
			return true
		}
	}
	return false
}
