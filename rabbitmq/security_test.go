package rabbitmq

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/devcert"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
)

// tlsProxy starts a TLS listener with development certificates that proxies
// to the test broker, and returns it with the client-side CA pool.
func tlsProxy(t *testing.T) (*proxy, *x509.CertPool) {
	t.Helper()
	testenv.AMQPURL(t)
	files, err := devcert.Generate(t.TempDir(), []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := files.ServerCertificate()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := files.CertPool()
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	return p, pool
}

func TestTLSWithDevelopmentCertificatesAllowed(t *testing.T) {
	p, pool := tlsProxy(t)
	cfg := AllowDevelopmentCertificates(&tls.Config{RootCAs: pool})
	c := openTest(t, func(c *driver.Config) {
		c.URLs = []string{p.url("amqps")}
		c.TLS = cfg
	})
	ctx := ctxFor(t, 10*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	if err := c.Publish(ctx, driver.Message{RoutingKey: q, Mandatory: true, MessageID: "tls"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// The negotiated version is at least TLS 1.2.
	if v := c.cur.Load().ac.ConnectionState().Version; v < tls.VersionTLS12 {
		t.Fatalf("TLS version %x", v)
	}
}

func TestTLSRefusesDevelopmentCertificatesByDefault(t *testing.T) {
	p, pool := tlsProxy(t)
	_, err := open(ctxFor(t, 10*time.Second), driver.Config{
		URLs: []string{p.url("amqps")},
		TLS:  &tls.Config{RootCAs: pool},
	})
	if !errors.Is(err, ErrDevelopmentCertificate) {
		t.Fatalf("Open with a trusted development certificate, not allowed: %v", err)
	}
	// A clone of an allowing configuration does not carry the permission.
	_, err = open(ctxFor(t, 10*time.Second), driver.Config{
		URLs: []string{p.url("amqps")},
		TLS:  AllowDevelopmentCertificates(&tls.Config{RootCAs: pool}).Clone(),
	})
	if !errors.Is(err, ErrDevelopmentCertificate) {
		t.Fatalf("Open with a clone of an allowing configuration: %v", err)
	}
}

func TestTLSSystemRootsRefuseDevelopmentCA(t *testing.T) {
	p, _ := tlsProxy(t)
	_, err := open(ctxFor(t, 10*time.Second), driver.Config{URLs: []string{p.url("amqps")}})
	var ua x509.UnknownAuthorityError
	if err == nil || (!errors.As(err, &ua) && !strings.Contains(err.Error(), "certificate")) {
		t.Fatalf("Open verifying with the system roots: %v", err)
	}
	// Even when the system roots are bypassed, the marker is refused.
	_, err = open(ctxFor(t, 10*time.Second), driver.Config{
		URLs: []string{p.url("amqps")},
		TLS:  &tls.Config{InsecureSkipVerify: true},
	})
	if !errors.Is(err, ErrDevelopmentCertificate) {
		t.Fatalf("Open skipping verification: %v", err)
	}
}

func TestTLSConfigWithPlainURLRefused(t *testing.T) {
	_, err := open(context.Background(), driver.Config{
		URLs: []string{"amqp://guest:secretpw@127.0.0.1:5672/"},
		TLS:  &tls.Config{},
	})
	if err == nil || !strings.Contains(err.Error(), "amqps://") || strings.Contains(err.Error(), "secretpw") {
		t.Fatalf("TLS with amqp://: %v", err)
	}
}

func TestClientTLSMinimumVersion(t *testing.T) {
	c := clientTLS(&tls.Config{MinVersion: tls.VersionTLS10}, "h")
	if c.MinVersion != tls.VersionTLS12 || c.ServerName != "h" {
		t.Fatalf("MinVersion %x ServerName %q", c.MinVersion, c.ServerName)
	}
	if c := clientTLS(nil, "h"); c.MinVersion != tls.VersionTLS12 || c.RootCAs != nil || c.InsecureSkipVerify {
		t.Fatal("default TLS configuration is not verifying with the system roots at TLS 1.2")
	}
	if c := clientTLS(&tls.Config{MinVersion: tls.VersionTLS13}, "h"); c.MinVersion != tls.VersionTLS13 {
		t.Fatal("TLS 1.3 minimum lowered")
	}
}

func TestCredentialsProviderOverridesURL(t *testing.T) {
	fastBackoff(t)
	p := newProxy(t, nil)
	u, _ := url.Parse(p.url("amqp"))
	user := u.User.Username()
	pass, _ := u.User.Password()
	u.User = url.UserPassword(user, "not-the-password")
	var calls atomic.Int32
	var log eventLog
	c := openTest(t, func(cfg *driver.Config) {
		cfg.URLs = []string{u.String()}
		cfg.OnEvent = log.add
		cfg.Credentials = func(ctx context.Context) (driver.Credentials, error) {
			calls.Add(1)
			return driver.Credentials{Username: user, Password: pass}, nil
		}
	})
	if calls.Load() != 1 {
		t.Fatalf("provider called %d times for the first connection", calls.Load())
	}
	p.cut()
	testenv.Eventually(t, "recovery", func() bool { return log.count(driver.EventRecovered) > 0 })
	if calls.Load() < 2 {
		t.Fatalf("provider not consulted on reconnection (%d calls)", calls.Load())
	}
	if err := c.Ping(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestPasswordNeverInErrors(t *testing.T) {
	const secret = "S3cret-Wr0ng-Passw0rd"
	u, _ := url.Parse(testenv.AMQPURL(t))
	u.User = url.UserPassword(u.User.Username(), secret)
	_, err := open(ctxFor(t, 10*time.Second), driver.Config{URLs: []string{u.String()}})
	if err == nil {
		t.Fatal("connected with a wrong password")
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("the password appears in %q", err)
	}
	t.Logf("wrong password: %v", err)

	_, err = open(ctxFor(t, 10*time.Second), driver.Config{
		URLs: []string{testenv.AMQPURL(t)},
		Credentials: func(context.Context) (driver.Credentials, error) {
			return driver.Credentials{Username: "guest", Password: secret}, nil
		},
	})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("provider with a wrong password: %v", err)
	}

	bad := "amqp://guest:" + secret + "@127.0.0.1:1/%zz"
	_, err = open(context.Background(), driver.Config{URLs: []string{bad}})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("unparseable URL: %v", err)
	}
	_, err = open(ctxFor(t, 5*time.Second), driver.Config{URLs: []string{"amqp://guest:" + secret + "@127.0.0.1:1/"}})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("refused connection: %v", err)
	}

	c := openTest(t, func(cfg *driver.Config) {
		cfg.URLs = []string{testenv.AMQPURL(t)}
	})
	if s, ok := any(c).(interface{ String() string }); ok {
		tu, _ := url.Parse(testenv.AMQPURL(t))
		if pw, _ := tu.User.Password(); pw != "" && strings.Contains(s.String(), ":"+pw+"@") {
			t.Fatalf("String() reveals the password: %s", s)
		}
	}
}

func TestOpenTriesURLsInTurn(t *testing.T) {
	c := openTest(t, func(cfg *driver.Config) {
		cfg.URLs = []string{"amqp://guest:guest@127.0.0.1:1/", testenv.AMQPURL(t)}
		cfg.DialTimeout = 2 * time.Second
	})
	if err := c.Ping(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}
