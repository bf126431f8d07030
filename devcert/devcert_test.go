package devcert

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"testing"
)

func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	f, err := Generate(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f.CAKey, f.ServerKey, f.ClientKey} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", p, st.Mode().Perm())
		}
	}
	pool, err := f.CertPool()
	if err != nil {
		t.Fatal(err)
	}
	server := readCert(t, f.ServerCert)
	for _, host := range DefaultHosts {
		if _, err := server.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("server certificate for %s: %v", host, err)
		}
	}
	client := readCert(t, f.ClientCert)
	if _, err := client.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	for _, c := range []*x509.Certificate{readCert(t, f.CACert), server, client} {
		if !IsDevelopment(c) || !strings.Contains(c.Subject.String(), Marker) || !strings.Contains(c.Issuer.String(), Marker) {
			t.Errorf("%s is not marked: subject %s issuer %s", c.Subject.CommonName, c.Subject, c.Issuer)
		}
	}
	if _, err := f.ServerCertificate(); err != nil {
		t.Error(err)
	}
	if _, err := f.ClientCertificate(); err != nil {
		t.Error(err)
	}
	// Generating again replaces the files.
	if _, err := Generate(dir, []string{"broker.example"}); err != nil {
		t.Fatal(err)
	}
	if got := readCert(t, f.ServerCert).DNSNames; len(got) != 1 || got[0] != "broker.example" {
		t.Errorf("regenerated server certificate names %v", got)
	}
}

func TestIsDevelopmentFalseForOthers(t *testing.T) {
	if IsDevelopment(&x509.Certificate{}) {
		t.Fatal("an unmarked certificate is reported as a development certificate")
	}
}

func TestGenerateNeedsDir(t *testing.T) {
	if _, err := Generate("", nil); err == nil {
		t.Fatal("no error for an empty directory")
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
