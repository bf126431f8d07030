package rabbitmq

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"runtime"
	"sync"
	"weak"

	"github.com/acemq/acemq/devcert"
)

// DevelopmentMarker is the text that marks a development certificate (see
// package devcert). The driver refuses a broker whose certificate chain
// carries it in a subject or issuer unless the TLS configuration was passed
// through AllowDevelopmentCertificates.
const DevelopmentMarker = devcert.Marker

// ErrDevelopmentCertificate is returned (wrapped) when the broker presents a
// development certificate and development certificates are not allowed.
var ErrDevelopmentCertificate = errors.New("the broker presented a development certificate (" + DevelopmentMarker +
	"); pass the TLS configuration through rabbitmq.AllowDevelopmentCertificates to accept it")

var (
	devAllowedMu sync.Mutex
	devAllowed   = map[weak.Pointer[tls.Config]]struct{}{}
)

// AllowDevelopmentCertificates returns a copy of cfg (a new configuration
// when cfg is nil) with which the driver accepts a broker certificate marked
// as a development certificate. Normal verification still applies: the
// development CA must be in RootCAs (see devcert.Files.CertPool).
//
// Use it for local development and tests only. The permission belongs to
// the returned *tls.Config value itself: a Clone of it does not carry it.
func AllowDevelopmentCertificates(cfg *tls.Config) *tls.Config {
	var c *tls.Config
	if cfg == nil {
		c = &tls.Config{MinVersion: tls.VersionTLS12}
	} else {
		c = cfg.Clone()
	}
	wp := weak.Make(c)
	devAllowedMu.Lock()
	devAllowed[wp] = struct{}{}
	devAllowedMu.Unlock()
	runtime.AddCleanup(c, func(wp weak.Pointer[tls.Config]) {
		devAllowedMu.Lock()
		delete(devAllowed, wp)
		devAllowedMu.Unlock()
	}, wp)
	return c
}

// DevelopmentCertificatesAllowed reports whether cfg was made by
// AllowDevelopmentCertificates.
func DevelopmentCertificatesAllowed(cfg *tls.Config) bool {
	if cfg == nil {
		return false
	}
	devAllowedMu.Lock()
	_, ok := devAllowed[weak.Make(cfg)]
	devAllowedMu.Unlock()
	return ok
}

// clientTLS builds the TLS configuration for one amqps:// connection
// attempt to host: a clone of base (or a fresh configuration, which
// verifies with the system roots), TLS 1.2 at least, the server name set,
// and development certificates refused unless base allows them.
func clientTLS(base *tls.Config, host string) *tls.Config {
	allowDev := DevelopmentCertificatesAllowed(base)
	var c *tls.Config
	if base == nil {
		c = &tls.Config{}
	} else {
		c = base.Clone()
	}
	if c.MinVersion < tls.VersionTLS12 {
		c.MinVersion = tls.VersionTLS12
	}
	if c.ServerName == "" {
		c.ServerName = host
	}
	prev := c.VerifyConnection
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if !allowDev {
			if err := refuseDevelopment(cs); err != nil {
				return err
			}
		}
		if prev != nil {
			return prev(cs)
		}
		return nil
	}
	return c
}

func refuseDevelopment(cs tls.ConnectionState) error {
	check := func(certs []*x509.Certificate) error {
		for _, cert := range certs {
			if devcert.IsDevelopment(cert) {
				return ErrDevelopmentCertificate
			}
		}
		return nil
	}
	if err := check(cs.PeerCertificates); err != nil {
		return err
	}
	for _, chain := range cs.VerifiedChains {
		if err := check(chain); err != nil {
			return err
		}
	}
	return nil
}
