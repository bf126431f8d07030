package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acemq/acemq/devcert"
)

func TestCertsRefusesWithoutAllowDevelopment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	r := runCLI(t, "", "certs", "--dir", dir).wantCode(t, 1)
	if !strings.Contains(r.stderr, "--allow-development") || !strings.Contains(r.stderr, devcert.Marker) {
		t.Errorf("the refusal does not explain itself:\n%s", r.stderr)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("the refusal still wrote the directory")
	}
}

func TestCertsWritesMarkedCertificates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	r := runCLI(t, "", "certs", "--dir", dir, "--host", "rabbit.test", "--host", "10.1.2.3", "--allow-development", "--json").wantCode(t, 0)
	m := jsonLines(t, r.stdout)
	if len(m) != 1 {
		t.Fatalf("stdout %q", r.stdout)
	}
	serverPEM, err := os.ReadFile(m[0]["serverCert"].(string))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(serverPEM)
	if block == nil {
		t.Fatal("server.pem holds no PEM block")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !devcert.IsDevelopment(cert) {
		t.Error("the server certificate is not marked as a development certificate")
	}
	if err := cert.VerifyHostname("rabbit.test"); err != nil {
		t.Error(err)
	}
	if err := cert.VerifyHostname("10.1.2.3"); err != nil {
		t.Error(err)
	}
	info, err := os.Stat(m[0]["serverKey"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("server key mode %v, want 0600", info.Mode().Perm())
	}
	r = runCLI(t, "", "certs", "--dir", dir, "--allow-development").wantCode(t, 0)
	if !strings.Contains(r.stdout, "DEVELOPMENT") || !strings.Contains(r.stdout, "ssl_options.cacertfile") {
		t.Errorf("text output:\n%s", r.stdout)
	}
}

// TestTLSFlagsWithDevelopmentCertificates points a command at a TLS server
// presenting a certificate from acemq certs: refused as a development
// certificate unless --tls-allow-development is given.
func TestTLSFlagsWithDevelopmentCertificates(t *testing.T) {
	dir := t.TempDir()
	runCLI(t, "", "certs", "--dir", dir, "--allow-development").wantCode(t, 0)
	files := devcert.Files{ServerCert: filepath.Join(dir, devcert.ServerCertFile), ServerKey: filepath.Join(dir, devcert.ServerKeyFile)}
	cert, err := files.ServerCertificate()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Complete the handshake, then hang up: not a broker.
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	url := "amqps://guest:guest@localhost:" + port + "/"
	ca := filepath.Join(dir, devcert.CACertFile)

	r := runCLI(t, "", "consume", "--url", url, "--tls-ca", ca, "--queue", "q").wantCode(t, 1)
	if !strings.Contains(r.stderr, "development certificate") {
		t.Errorf("without --tls-allow-development: %s", r.stderr)
	}
	r = runCLI(t, "", "consume", "--url", url, "--tls-ca", ca, "--tls-allow-development", "--queue", "q").wantCode(t, 1)
	if strings.Contains(r.stderr, "development certificate") || strings.Contains(r.stderr, "certificate signed by unknown authority") {
		t.Errorf("with --tls-allow-development the certificate was still refused: %s", r.stderr)
	}
	r = runCLI(t, "", "consume", "--url", url, "--tls-allow-development", "--queue", "q").wantCode(t, 1)
	if !strings.Contains(r.stderr, "unknown authority") {
		t.Errorf("without --tls-ca the development CA should be unknown: %s", r.stderr)
	}
	r = runCLI(t, "", "consume", "--url", "amqp://localhost:1/", "--tls-ca", ca, "--queue", "q").wantCode(t, 1)
	if !strings.Contains(r.stderr, "amqps://") {
		t.Errorf("TLS flags with amqp://: %s", r.stderr)
	}
}
