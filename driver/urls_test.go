package driver

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitURLs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"amqp://a/", []string{"amqp://a/"}},
		{"amqp://u:p@a:5672/,amqp://u:p@b:5672/", []string{"amqp://u:p@a:5672/", "amqp://u:p@b:5672/"}},
		{" amqp://a/ , amqp://b/,amqp://c/ ", []string{"amqp://a/", "amqp://b/", "amqp://c/"}},
		// A comma not followed by a scheme belongs to the URL: a password
		// with a comma, a vhost with one.
		{"amqp://u:p,w@a/,amqps://b/", []string{"amqp://u:p,w@a/", "amqps://b/"}},
		{"amqp://a/v,h", []string{"amqp://a/v,h"}},
		{"amqp://a/,b://", []string{"amqp://a/", "b://"}},
		{"amqp://a/,1x://b", []string{"amqp://a/,1x://b"}},
		{"memory://x,memory://y", []string{"memory://x", "memory://y"}},
		{"", []string{""}},
	} {
		if got := SplitURLs(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("SplitURLs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzSplitURLs: the parts, joined by commas, are the input less the
// spaces around the commas that split it; every part after the first
// begins with a scheme; no part holds a comma that starts a URL.
func FuzzSplitURLs(f *testing.F) {
	f.Add("amqp://a/,amqp://b/")
	f.Add("amqp://u:p,w@a/ , amqps://b/")
	f.Add(",,a://")
	f.Fuzz(func(t *testing.T, s string) {
		parts := SplitURLs(s)
		if len(parts) == 0 {
			t.Fatal("no parts")
		}
		squeezed := strings.Join(parts, ",")
		if len(squeezed) > len(s) {
			t.Fatalf("the parts %q are longer than the input %q", parts, s)
		}
		for i, p := range parts {
			if i > 0 && !startsWithScheme(p) {
				t.Fatalf("part %d %q of %q does not begin with a scheme", i, p, s)
			}
			if again := SplitURLs(p); len(again) != 1 {
				t.Fatalf("part %q of %q splits again into %q", p, s, again)
			}
		}
	})
}

func TestRedactURLList(t *testing.T) {
	got := RedactURL("amqp://u:one@a:5672/,amqps://u:two@b:5671/v")
	if got != "amqp://u:xxxxx@a:5672/,amqps://u:xxxxx@b:5671/v" {
		t.Fatalf("RedactURL of a list = %q", got)
	}
	if got := RedactURL("amqp://u:p,w@a/"); got != "amqp://u:xxxxx@a/" {
		t.Fatalf("RedactURL of a URL with a comma in its password = %q", got)
	}
}
