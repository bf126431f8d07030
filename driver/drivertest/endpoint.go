package drivertest

import (
	"net/url"

	"github.com/acemq/acemq/driver"
)

// testEndpoint checks a driver.EndpointReporter: an open connection names
// the URL it is on, parseable, with no password shown; a closed one names
// none.
func testEndpoint(e *env, r driver.EndpointReporter) {
	t := e.t
	ep := r.Endpoint()
	t.Logf("endpoint: %s", ep)
	u, err := url.Parse(ep)
	switch {
	case ep == "":
		t.Fatal("an open connection reports no endpoint")
	case err != nil || u.Scheme == "":
		t.Fatalf("the endpoint %q is not a URL: %v", ep, err)
	}
	if p, ok := u.User.Password(); ok && p != "xxxxx" {
		t.Errorf("the endpoint %q shows a password", ep)
	}
	c := e.conn()
	other := as[driver.EndpointReporter](e, c)
	if got := other.Endpoint(); got != ep {
		t.Errorf("another connection to the same URL reports %q, the first %q", got, ep)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := other.Endpoint(); got != "" {
		t.Errorf("a closed connection still reports the endpoint %q", got)
	}
}
