package credentials_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acemq/acemq/credentials"
)

func TestFromEnv(t *testing.T) {
	t.Setenv("ACEMQ_T_USER", "svc")
	t.Setenv("ACEMQ_T_PASS", "s3cret")
	p := credentials.FromEnv("ACEMQ_T_USER", "ACEMQ_T_PASS")
	c, err := p(context.Background())
	if err != nil || c.Username != "svc" || c.Password != "s3cret" {
		t.Fatalf("got %+v, %v", c, err)
	}
	if strings.Contains(c.String(), "s3cret") {
		t.Fatalf("String shows the password: %s", c)
	}
	// Read again on every call: a rotated secret is seen.
	t.Setenv("ACEMQ_T_PASS", "rotated")
	if c, _ = p(context.Background()); c.Password != "rotated" {
		t.Fatalf("the provider did not read the variable again: %+v", c)
	}
	t.Setenv("ACEMQ_T_PASS", "")
	_, err = p(context.Background())
	if err == nil || !strings.Contains(err.Error(), "ACEMQ_T_PASS") {
		t.Fatalf("missing password: %v", err)
	}
}

func TestFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "creds")
	if err := os.WriteFile(path, []byte("svc\r\ns3cret  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := credentials.FromFile(path)(context.Background())
	if err != nil || c.Username != "svc" || c.Password != "s3cret" {
		t.Fatalf("got %+v, %v", c, err)
	}
	if err := os.WriteFile(path, []byte("only-a-user\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := credentials.FromFile(path)(context.Background()); err == nil {
		t.Fatal("a file without a password was accepted")
	}
}
