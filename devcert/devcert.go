// Package devcert generates throw-away TLS certificates for development and
// tests: a certificate authority, a server certificate for the given hosts
// and a client certificate, written as PEM files into a directory.
//
// Every certificate it makes carries [Marker] in its subject, and so in the
// issuer of the leaf certificates. AceMQ refuses a broker that presents such
// a certificate unless development certificates are explicitly allowed (see
// rabbitmq.AllowDevelopmentCertificates), so a development CA that leaks into
// a trust store cannot silently be used in production.
//
// The keys are ECDSA P-256, written unencrypted with mode 0600.
package devcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Marker is carried in the Organization of the subject of every certificate
// this package generates. Certificates whose subject or issuer contains it
// are refused by AceMQ unless development certificates are allowed.
const Marker = "ACEMQ DEVELOPMENT ONLY - DO NOT TRUST"

// Validity is how long generated certificates are valid.
const Validity = 365 * 24 * time.Hour

// File names written by Generate.
const (
	CACertFile     = "ca.pem"
	CAKeyFile      = "ca-key.pem"
	ServerCertFile = "server.pem"
	ServerKeyFile  = "server-key.pem"
	ClientCertFile = "client.pem"
	ClientKeyFile  = "client-key.pem"
)

// DefaultHosts are the names the server certificate covers when Generate is
// given none.
var DefaultHosts = []string{"localhost", "127.0.0.1", "::1"}

// Files are the paths of the PEM files Generate wrote.
type Files struct {
	Dir        string
	CACert     string
	CAKey      string
	ServerCert string
	ServerKey  string
	ClientCert string
	ClientKey  string
}

// Generate creates a development CA, a server certificate for hosts (IP
// addresses and DNS names; DefaultHosts when empty) and a client
// certificate, all signed by the CA, and writes them as PEM files into dir,
// which is created if needed. Existing files of the same names are replaced.
func Generate(dir string, hosts []string) (Files, error) {
	if dir == "" {
		return Files{}, errors.New("devcert: no directory given")
	}
	if len(hosts) == 0 {
		hosts = DefaultHosts
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Files{}, fmt.Errorf("devcert: %w", err)
	}
	now := time.Now()

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Files{}, fmt.Errorf("devcert: generating the CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject: pkix.Name{
			CommonName:   "AceMQ Development CA (" + Marker + ")",
			Organization: []string{Marker},
		},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Files{}, fmt.Errorf("devcert: creating the CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return Files{}, fmt.Errorf("devcert: %w", err)
	}

	leaf := func(cn string, usage x509.ExtKeyUsage, hosts []string) ([]byte, *ecdsa.PrivateKey, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject: pkix.Name{
				CommonName:   cn,
				Organization: []string{Marker},
			},
			NotBefore:   now.Add(-time.Hour),
			NotAfter:    now.Add(Validity),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		return der, key, err
	}
	serverDER, serverKey, err := leaf(hosts[0], x509.ExtKeyUsageServerAuth, hosts)
	if err != nil {
		return Files{}, fmt.Errorf("devcert: creating the server certificate: %w", err)
	}
	clientDER, clientKey, err := leaf("acemq-client", x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		return Files{}, fmt.Errorf("devcert: creating the client certificate: %w", err)
	}

	f := Files{
		Dir:        dir,
		CACert:     filepath.Join(dir, CACertFile),
		CAKey:      filepath.Join(dir, CAKeyFile),
		ServerCert: filepath.Join(dir, ServerCertFile),
		ServerKey:  filepath.Join(dir, ServerKeyFile),
		ClientCert: filepath.Join(dir, ClientCertFile),
		ClientKey:  filepath.Join(dir, ClientKeyFile),
	}
	writes := []struct {
		path string
		der  []byte
		key  *ecdsa.PrivateKey
	}{
		{f.CACert, caDER, nil}, {f.CAKey, nil, caKey},
		{f.ServerCert, serverDER, nil}, {f.ServerKey, nil, serverKey},
		{f.ClientCert, clientDER, nil}, {f.ClientKey, nil, clientKey},
	}
	for _, w := range writes {
		if err := writePEM(w.path, w.der, w.key); err != nil {
			return Files{}, fmt.Errorf("devcert: %w", err)
		}
	}
	return f, nil
}

// CertPool returns a pool holding the development CA, for a client's
// tls.Config RootCAs or a server's ClientCAs.
func (f Files) CertPool() (*x509.CertPool, error) {
	pemBytes, err := os.ReadFile(f.CACert)
	if err != nil {
		return nil, fmt.Errorf("devcert: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("devcert: %s holds no certificate", f.CACert)
	}
	return pool, nil
}

// ServerCertificate loads the server certificate and key.
func (f Files) ServerCertificate() (tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		return c, fmt.Errorf("devcert: %w", err)
	}
	return c, nil
}

// ClientCertificate loads the client certificate and key.
func (f Files) ClientCertificate() (tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		return c, fmt.Errorf("devcert: %w", err)
	}
	return c, nil
}

// IsDevelopment reports whether cert's subject or issuer carries Marker.
func IsDevelopment(cert *x509.Certificate) bool {
	for _, n := range []pkix.Name{cert.Subject, cert.Issuer} {
		for _, atv := range n.Names {
			if s, ok := atv.Value.(string); ok && strings.Contains(s, Marker) {
				return true
			}
		}
		if strings.Contains(n.String(), Marker) {
			return true
		}
	}
	return false
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func writePEM(path string, der []byte, key *ecdsa.PrivateKey) error {
	var block *pem.Block
	mode := os.FileMode(0o644)
	if key != nil {
		b, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: b}
		mode = 0o600
	} else {
		block = &pem.Block{Type: "CERTIFICATE", Bytes: der}
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(block), mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
