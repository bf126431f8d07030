package media

import "testing"

func TestMatches(t *testing.T) {
	types := []string{"application/xml", "text/xml"}
	suffixes := []string{"+xml"}
	for ct, want := range map[string]bool{
		"application/xml":                 true,
		"Application/XML; charset=utf-8":  true,
		" text/xml ":                      true,
		"application/atom+xml":            true,
		"application/+xml":                false,
		"+xml":                            false,
		"":                                false,
		"application/json":                false,
		"application/xml-dtd":             false,
		"application/vnd.acme+xml;v=2":    true,
		"application/vnd.acme+XML":        true,
		"application/vnd.acme+xmlfoo":     false,
		"application/vnd.acme.encrypted":  false,
		"application/octet-stream; a=xml": false,
	} {
		if got := Matches(ct, types, suffixes); got != want {
			t.Errorf("Matches(%q) = %t, want %t", ct, got, want)
		}
	}
}
