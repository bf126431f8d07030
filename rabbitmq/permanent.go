package rabbitmq

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"

	amqp "github.com/rabbitmq/amqp091-go"
)

// permanentDial reports whether a dial failed in a way that dialling again
// cannot fix, so that acemq.WithWaitForBroker stops instead of retrying:
//
//   - the broker refused the login or the virtual host (403 ACCESS_REFUSED,
//     which amqp091 also reports as ErrCredentials, ErrVhost or ErrSASL;
//     530 NOT_ALLOWED);
//   - the broker's certificate does not verify (unknown authority, wrong
//     host name, expired or otherwise invalid), or is a development
//     certificate that was not allowed (ErrDevelopmentCertificate);
//   - the port answered, but not with TLS (an amqps:// URL on a plain
//     AMQP port).
//
// A dial that ran out of time is never permanent, whatever amqp091 made of
// it (a handshake cut short by the deadline reads as ErrCredentials).
// Everything else — refused or unreachable ports, connections reset or
// closed during the handshake, a credentials provider that failed — may
// pass once the broker is up, and is retried.
func permanentDial(err error) bool {
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var ae *amqp.Error
	if errors.As(err, &ae) && (ae.Code == amqp.AccessRefused || ae.Code == amqp.NotAllowed) {
		return true
	}
	if errors.Is(err, ErrDevelopmentCertificate) {
		return true
	}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
	)
	return errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &record)
}
