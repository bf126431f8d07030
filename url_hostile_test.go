package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
)

// A password holding a character a URL gives a meaning to is a malformed
// URL; the error says so, and where, and never quotes any part of the user
// information (net/url's own text does: `invalid port ":Hunt" after
// host`).
var hostilePasswords = []struct {
	class, password string
	// malformed: the URL cannot be read (else it is read, and the error is
	// the dial's).
	malformed bool
	// says is what the error must name.
	says string
}{
	{"slash", "Qz7/Wk9vXj", true, "the password holds a '/'"},
	{"the issue's slash", "Hunt/er2Secret", true, "the password holds a '/'"},
	{"hash", "Qz7#Wk9vXj", true, "the password holds a '#'"},
	{"question mark", "Qz7?Wk9vXj", true, "the password holds a '?'"},
	{"at sign", "Qz7@Wk9vXj", false, ""},
	{"bad escape", "Qz7%zzWk9vXj", true, "the password holds a '%' not followed by two hexadecimal digits"},
	{"bad escape at the end", "Qz7Wk9vXj%4", true, "the password holds a '%' not followed by two hexadecimal digits"},
	{"extra colon", "Qz7:Wk9vXj", false, ""},
	{"space", "Qz7 Wk9vXj", true, "the password holds a space"},
	{"non-ASCII", "Qz7ü9Wké9vXj", true, "the password holds a non-ASCII character"},
	{"CJK", "密码Qz7Wk9vXj", true, "the password holds a non-ASCII character"},
	{"newline", "Qz7\nWk9vXj", true, "the password holds a control character"},
	{"NUL", "Qz7\x00Wk9vXj", true, "the password holds a control character"},
	{"DEL", "Qz7\x7fWk9vXj", true, "the password holds a control character"},
	{"slash and at", "Qz7/Wk@9vXj", true, "the password holds a '/'"},
	{"digits and slash", "1234/5678", true, "an '@' follows the host"},
	{"quote", `Qz7"Wk9vXj`, true, `the password holds a '"'`},
}

// leaks reports the first substring of secret, of 3 bytes or more, found
// in text.
func leaks(text, secret string) (string, bool) {
	for i := 0; i+3 <= len(secret); i++ {
		if s := secret[i : i+3]; strings.Contains(text, s) {
			return s, true
		}
	}
	return "", false
}

func TestURLErrorsHideTheUserinfo(t *testing.T) {
	for _, p := range hostilePasswords {
		t.Run(p.class, func(t *testing.T) {
			// 127.0.0.1:1 refuses at once, for the URLs that can be read.
			urls := map[string]string{
				"amqp":     "amqp://alice:" + p.password + "@127.0.0.1:1/",
				"amqps":    "amqps://alice:" + p.password + "@127.0.0.1:1/vhost",
				"list":     "amqp://guest:guest@127.0.0.1:1/,amqp://alice:" + p.password + "@127.0.0.1:1/",
				"fallback": "amqp://guest:guest@127.0.0.1:1/",
			}
			if p.malformed {
				urls["memory"] = "memory://alice:" + p.password + "@broker"
			}
			for name, url := range urls {
				var opts []acemq.ConnOption
				if name == "fallback" {
					opts = append(opts, acemq.WithFallbackURLs("amqp://alice:"+p.password+"@127.0.0.1:1/"))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				c, err := acemq.Connect(ctx, url, opts...)
				cancel()
				if err == nil {
					_ = c.Close(context.Background())
					t.Errorf("%s: Connect(%q) succeeded", name, url)
					continue
				}
				text := err.Error()
				if s, ok := leaks(text, p.password); ok {
					t.Errorf("%s: the error quotes %q of the password: %s", name, s, text)
				}
				if !p.malformed {
					continue
				}
				if strings.Contains(text, "alice") {
					t.Errorf("%s: the error quotes the user name: %s", name, text)
				}
				if !strings.Contains(text, "malformed URL") || !strings.Contains(text, "xxxxx@127.0.0.1:1") && name != "memory" || !strings.Contains(text, p.says) {
					t.Errorf("%s: the error does not say what is wrong (want %q, and the URL with xxxxx for its user information): %s", name, p.says, text)
				}
				if name != "fallback" && !errors.Is(err, driver.ErrMalformedURL) {
					t.Errorf("%s: the error does not wrap driver.ErrMalformedURL: %v", name, err)
				}
			}
			if s, ok := leaks(driver.RedactURL("amqp://alice:"+p.password+"@127.0.0.1:1/"), p.password); ok {
				t.Errorf("RedactURL shows %q of the password", s)
			}
		})
	}
}
