package driver

import (
	"errors"
	"strings"
	"testing"
)

// Well-formed URLs parse as url.Parse parses them.
func TestParseURLAcceptsURLs(t *testing.T) {
	for _, raw := range []string{
		"amqp://guest:guest@localhost:5672/",
		"amqps://ops:p%2Fw%40d@rabbit.example:5671/prod?heartbeat=10",
		"amqp://u:Hunt%3Aer@[::1]:5672/%2F",
		"amqp://localhost",
		"amqp://u:a@b@host/", // the password is "a@b"
		"amqp://u:a:b@host/", // the password is "a:b"
		"memory://demo",
		"memory://orders-7/x",
		"http://guest:guest@127.0.0.1:15672/",
	} {
		u, err := ParseURL(raw)
		if err != nil || u.String() == "" {
			t.Errorf("ParseURL(%q): %v", raw, err)
		}
	}
}

func TestParseURLRefuses(t *testing.T) {
	for raw, want := range map[string]string{
		"amqp://u:p@host:56x2/":       `malformed URL "amqp://xxxxx@host:56x2/": invalid port after host`,
		"amqp://u:Hunt/er2@host/":     `malformed URL "amqp://xxxxx@host/": the password holds a '/'`,
		"amqp://Hu#nt:er2@host/":      `malformed URL "amqp://xxxxx@host/": an '@' follows the host`,
		"amqp://Hu nt:er2@host/":      `malformed URL "amqp://xxxxx@host/": the user name holds a space`,
		"amqp://a:b#c:d@host/":        `malformed URL "amqp://xxxxx@host/": the password holds a '#'`,
		"amqp://host:5672/v@x":        `malformed URL "amqp://xxxxx@x": an '@' follows the host`,
		"amqp:u:Hunt/er2@host":        `malformed URL "xxxxx@host": it has an '@' but no scheme://host part`,
		"u:Hunt/er2@host":             `malformed URL "xxxxx@host": it has an '@' but no scheme://host part`,
		"amqp://host/%zz":             `malformed URL "amqp://host/%zz": a '%' at byte 12 is not followed by two hexadecimal digits`,
		"amqp://ho st/":               `malformed URL "amqp://ho st/": invalid character in host name`,
		"amqp://u:p\tw@host/":         `malformed URL "amqp://xxxxx@host/": the password holds a control character`,
		"amqp://h\x01ost/":            `malformed URL "amqp://h\x01ost/": it holds a control character (byte 8 of the URL, 0x01)`,
		"://nothing":                  `malformed URL "://nothing": missing protocol scheme`,
		"amqp://u:a<b@host/":          `malformed URL "amqp://xxxxx@host/": the password holds a '<', which must be percent-encoded`,
		"amqp://u:" + "\xff" + "@h/":  `malformed URL "amqp://xxxxx@h/": the password holds a non-ASCII character`,
		"amqp://u:Hunt?er2@host:1/?x": `malformed URL "amqp://xxxxx@host:1/?x": the password holds a '?'`,
	} {
		_, err := ParseURL(raw)
		var ue *URLError
		if !errors.As(err, &ue) || !errors.Is(err, ErrMalformedURL) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("ParseURL(%q) = %v, want %s…", raw, err, want)
		}
	}
}

func TestMaskUserinfo(t *testing.T) {
	for raw, want := range map[string]string{
		"amqp://alice:Hunt/er2@host:5672/": "amqp://xxxxx@host:5672/",
		"amqp://host:5672/":                "amqp://host:5672/",
		"amqp://a:b@c@d/e@f":               "amqp://xxxxx@f",
		"a:b@c":                            "xxxxx@c",
	} {
		if got := MaskUserinfo(raw); got != want {
			t.Errorf("MaskUserinfo(%q) = %q, want %q", raw, got, want)
		}
	}
}

// Whatever a password holds, a URL's error never shows it: marked at its
// start, middle and end, no mark reaches the error or RedactURL.
func FuzzParseURLHidesThePassword(f *testing.F) {
	for _, s := range []string{"/", "#", "?", "@", "%zz", "%4", ":", " ", "ü", "\n", "\x00", "//x@y/z?q#f", "]", "[::1]", "%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		const a, b, c = "Zq", "Yx", "Wv"
		for i, raw := range []string{
			"amqp://alice:" + a + s + b + s + c + "@h:1/",
			"memory://u:" + a + s + b + s + c + "@name",
			"amqp://" + a + s + b + ":pw" + c + "@h:1/", // a user name: RedactURL shows it when the URL is well formed
		} {
			_, err := ParseURL(raw)
			texts := []string{errText(err)}
			if i < 2 || err != nil {
				texts = append(texts, RedactURL(raw))
			}
			for _, text := range texts {
				for _, mark := range []string{a, b, c} {
					if strings.Contains(text, mark) && !strings.Contains(s, mark) {
						t.Fatalf("%q shows the password's mark %s: %q", raw, mark, text)
					}
				}
			}
		}
	})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
