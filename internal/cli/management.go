package cli

import (
	"net"
	"net/url"
	"strings"

	"github.com/acemq/acemq/driver"
)

// ManagementURL is the management API's usual address for an AMQP URL:
// http://HOST:15672/ (https://HOST:15671/ for amqps), with its user and
// password, and the vhost.
func ManagementURL(amqpURL string) (mgmt, vhost string, ok bool) {
	u, err := driver.ParseURL(amqpURL)
	if err != nil || u.Hostname() == "" {
		return "", "", false
	}
	scheme, port := "http", "15672"
	if strings.EqualFold(u.Scheme, "amqps") {
		scheme, port = "https", "15671"
	}
	m := url.URL{Scheme: scheme, Host: net.JoinHostPort(u.Hostname(), port), Path: "/"}
	if u.User != nil {
		m.User = u.User
	} else {
		m.User = url.UserPassword("guest", "guest")
	}
	vhost = strings.TrimPrefix(u.Path, "/")
	if vhost == "" {
		vhost = "/"
	} else if v, err := url.PathUnescape(vhost); err == nil {
		vhost = v
	}
	return m.String(), vhost, true
}
