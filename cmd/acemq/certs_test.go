package main

import (
	"crypto/x509"
	"encoding/pem"
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
