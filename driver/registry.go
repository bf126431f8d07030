package driver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// Driver opens connections for the URL schemes it is registered under.
type Driver interface {
	Open(ctx context.Context, cfg Config) (Conn, error)
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Driver{}
)

// Register makes a driver available for a URL scheme. It panics if the
// scheme is already registered or the driver is nil.
func Register(scheme string, d Driver) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if d == nil {
		panic("driver: Register driver is nil")
	}
	if _, dup := registry[scheme]; dup {
		panic("driver: Register called twice for scheme " + scheme)
	}
	registry[scheme] = d
}

// Schemes lists the registered URL schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for s := range registry {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the driver registered for the scheme of rawURL.
func Lookup(rawURL string) (Driver, error) {
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("driver: the broker URL cannot be parsed: %w", err)
	}
	registryMu.RLock()
	d, ok := registry[u.Scheme]
	registryMu.RUnlock()
	if !ok {
		hint := ""
		if u.Scheme == "amqp" || u.Scheme == "amqps" {
			hint = `; import _ "github.com/acemq/acemq/rabbitmq" to register it`
		}
		return nil, fmt.Errorf("driver: no driver is registered for scheme %q (registered: %v)%s", u.Scheme, Schemes(), hint)
	}
	return d, nil
}

// Redact returns err with any URL password removed from its text: a
// *url.Error's URL is shown as RedactURL shows it, and its cause, when the
// URL could not be parsed, as ParseURL says it (net/url's own text can
// quote part of the password).
func Redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if _, perr := ParseURL(ue.URL); perr != nil {
			return perr
		}
		return fmt.Errorf("%s %q: %v", ue.Op, RedactURL(ue.URL), ue.Err)
	}
	return err
}

// RedactURL returns rawURL with its password replaced by "xxxxx"; in a
// comma-separated list of URLs (SplitURLs), every URL's. A URL ParseURL
// refuses is shown with everything that may be its user information
// replaced (MaskUserinfo).
func RedactURL(rawURL string) string {
	if parts := SplitURLs(rawURL); len(parts) > 1 {
		for i, p := range parts {
			parts[i] = RedactURL(p)
		}
		return strings.Join(parts, ",")
	}
	u, err := ParseURL(rawURL)
	if err != nil {
		return MaskUserinfo(rawURL)
	}
	return u.Redacted()
}
