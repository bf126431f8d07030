package driver

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// ErrMalformedURL is wrapped by the error of ParseURL (and so of
// acemq.Connect) for a URL that cannot be parsed.
var ErrMalformedURL = errors.New("malformed URL")

// A URLError is a URL that cannot be parsed. Its text names what is wrong
// and shows the URL with its user information (user name and password)
// replaced by "xxxxx"; it never contains any part of them, however the
// URL is malformed.
type URLError struct {
	// URL is the URL as shown: its user information masked.
	URL string
	// Problem says what is wrong and where.
	Problem string
}

func (e *URLError) Error() string {
	return fmt.Sprintf("malformed URL %q: %s", e.URL, e.Problem)
}

// Unwrap returns ErrMalformedURL.
func (e *URLError) Unwrap() error { return ErrMalformedURL }

// ParseURL parses a broker URL as url.Parse does, and also refuses an '@'
// after the host (in the path, query or fragment), or in a URL without a
// scheme://host part: that is nearly always a
// user name or password holding a '/', '?' or '#' that should have been
// percent-encoded, which url.Parse would otherwise read as a host and a
// path, putting part of the password where it is shown. Its error is a
// *URLError, which never contains any part of the URL's user information.
func ParseURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, &URLError{URL: MaskUserinfo(rawURL), Problem: urlProblem(rawURL, err)}
	}
	start := authorityStart(rawURL)
	if start < 0 {
		if strings.Contains(rawURL, "@") {
			return nil, &URLError{URL: MaskUserinfo(rawURL), Problem: "it has an '@' but no scheme://host part; write it as amqp://user:password@host:port/vhost"}
		}
		return u, nil
	}
	rest := rawURL[start:]
	if end := strings.IndexAny(rest, "/?#"); end >= 0 && strings.Contains(rest[end:], "@") {
		// A password holding a '/' and a virtual host holding an '@' read
		// alike: say both.
		return nil, &URLError{URL: MaskUserinfo(rawURL), Problem: "an '@' follows the host, in the path, query or fragment: " + encodeHint}
	}
	return u, nil
}

// encodeHint says how to write the characters that end a URL's user
// information early.
const encodeHint = "a '/', '?', '#' or '@' in a user name or password must be percent-encoded (%2F, %3F, %23, %40), as must a '@' in a virtual host (%40)"

// authorityStart is where a URL's authority (user information and host)
// begins: after "scheme://", or -1 when there is none.
func authorityStart(raw string) int {
	i := strings.Index(raw, "://")
	if i < 0 {
		return -1
	}
	return i + 3
}

// userinfoSpan is where the user information of raw may be, however raw
// is malformed: from the start of the authority (or of raw, without
// "://") to its last '@' — the widest span a user name and password can
// take, so that masking it hides them whatever they hold.
func userinfoSpan(raw string) (start, end int, ok bool) {
	// Without "://" it is not clear what a scheme is ("alice:pw@host"
	// reads as the scheme "alice"): everything up to the last '@' is
	// taken for user information.
	start = max(authorityStart(raw), 0)
	at := strings.LastIndexByte(raw[start:], '@')
	if at < 0 {
		return 0, 0, false
	}
	return start, start + at, true
}

// MaskUserinfo returns rawURL with everything that may be its user
// information (up to its last '@') replaced by "xxxxx", parseable or not:
// "amqp://alice:Hunt/er2@host/" is "amqp://xxxxx@host/".
func MaskUserinfo(rawURL string) string {
	start, end, ok := userinfoSpan(rawURL)
	if !ok {
		return rawURL
	}
	return rawURL[:start] + "xxxxx" + rawURL[end:]
}

// urlProblem says what is wrong with raw, which url.Parse refused with
// err, without quoting any part of its user information.
func urlProblem(raw string, err error) string {
	if p, ok := userinfoProblem(raw); ok {
		return p
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c < 0x20 || c == 0x7f {
			return fmt.Sprintf("it holds a control character (byte %d of the URL, 0x%02x)", i, c)
		}
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] == '%' && (i+2 >= len(raw) || !isHex(raw[i+1]) || !isHex(raw[i+2])) {
			return fmt.Sprintf("a '%%' at byte %d is not followed by two hexadecimal digits; write a '%%' as %%25", i)
		}
	}
	// What is left is about the scheme, the host or the port: say it as
	// net/url does, without what it quotes (the user information is not
	// in question, but a quote could still hold some of it).
	var ue *url.Error
	text := err.Error()
	if errors.As(err, &ue) {
		text = ue.Err.Error()
	}
	text = strings.TrimPrefix(quotedRE.ReplaceAllString(text, ""), "net/url: ")
	return strings.Join(strings.Fields(text), " ")
}

// userinfoProblem finds what makes raw's user information unreadable: a
// control character, a '/', '?' or '#' (which end it early), a bad
// percent escape, or a character that must be escaped. It names the
// character only when it is ASCII, and never quotes the rest.
func userinfoProblem(raw string) (string, bool) {
	start, end, ok := userinfoSpan(raw)
	if !ok {
		return "", false
	}
	user := raw[start:end]
	// part names the half of the user information byte i of user is in.
	part := func(i int) string {
		if strings.IndexByte(user[:i], ':') >= 0 {
			return "the password"
		}
		return "the user name"
	}
	for i := 0; i < len(user); i++ {
		if c := user[i]; c < 0x20 || c == 0x7f {
			return part(i) + " holds a control character, which must be percent-encoded", true
		}
	}
	if i := strings.IndexAny(user, "/?#"); i >= 0 {
		return fmt.Sprintf("%s holds a '%c', which ends the user information early; %s", part(i), user[i], encodeHint), true
	}
	for i := 0; i < len(user); i++ {
		if user[i] == '%' && (i+2 >= len(user) || !isHex(user[i+1]) || !isHex(user[i+2])) {
			return part(i) + " holds a '%' not followed by two hexadecimal digits; write a '%' as %25", true
		}
	}
	for i := 0; i < len(user); i++ {
		if c := user[i]; !userinfoByte(c) {
			what := fmt.Sprintf("a '%c'", c)
			switch {
			case c == ' ':
				what = "a space"
			case c >= 0x80:
				what = "a non-ASCII character"
			}
			return fmt.Sprintf("%s holds %s, which must be percent-encoded", part(i), what), true
		}
	}
	return "", false
}

var quotedRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// userinfoByte reports whether c may appear as it is in a URL's user
// information (RFC 3986: unreserved, sub-delims, ':', and '%' escapes; and
// '@', which url.Parse takes up to the last one).
func userinfoByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:%@", c) >= 0
}
