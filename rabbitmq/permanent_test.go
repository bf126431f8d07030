package rabbitmq

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/driver"
)

func TestPermanentDial(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused port", refused, false},
		{"closed during the handshake", fmt.Errorf("handshake: %w", io.EOF), false},
		{"credentials provider", fmt.Errorf("the credentials provider failed: %w", errors.New("vault is down")), false},
		{"bad login", amqp.ErrCredentials, true},
		{"vhost refused", amqp.ErrVhost, true},
		{"not allowed", &amqp.Error{Code: amqp.NotAllowed, Reason: "vhost / not found", Server: true}, true},
		{"handshake cut by the deadline", fmt.Errorf("%w: %w", context.DeadlineExceeded, amqp.ErrCredentials), false},
		{"unknown authority", fmt.Errorf("tls: %w", x509.UnknownAuthorityError{}), true},
		{"wrong host", x509.HostnameError{Certificate: &x509.Certificate{}, Host: "h"}, true},
		{"development certificate", fmt.Errorf("tls: %w", ErrDevelopmentCertificate), true},
		{"server error other than access", &amqp.Error{Code: amqp.ConnectionForced, Reason: "shutdown", Server: true}, false},
	} {
		if got := permanentDial(c.err); got != c.want {
			t.Errorf("%s: permanentDial(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestOpenMarksPermanentErrors: a configuration no dial can use, and a
// round where every URL failed permanently, are driver.ErrPermanent; a
// round where one URL might still answer is not.
func TestOpenMarksPermanentErrors(t *testing.T) {
	_, err := Driver{}.Open(context.Background(), driver.Config{URLs: []string{"http://h/"}})
	if !errors.Is(err, driver.ErrPermanent) {
		t.Errorf("Open with an http:// URL = %v, want driver.ErrPermanent", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, err = Driver{}.Open(context.Background(), driver.Config{URLs: []string{"amqp://" + addr + "/"}})
	if err == nil || errors.Is(err, driver.ErrPermanent) {
		t.Errorf("Open of a refused port = %v, want a temporary error", err)
	}
}
