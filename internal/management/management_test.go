package management

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func TestClientReadsQueuesAndExchanges(t *testing.T) {
	var gotAuth, gotPath string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		gotAuth, gotPath = user+":"+pass, r.URL.EscapedPath()
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/queues/"):
			_, _ = w.Write([]byte(`[{"name":"orders","type":"quorum","durable":true,"messages_ready":4,"messages_unacknowledged":1,"consumers":2}]`))
		case strings.HasPrefix(r.URL.Path, "/api/exchanges/"):
			_, _ = w.Write([]byte(`[{"name":"","type":"direct","durable":true},{"name":"orders","type":"topic","durable":true,"internal":false}]`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	c, err := New(strings.Replace(api.URL, "http://", "http://ops:s3cret@", 1)+"/", "")
	if err != nil {
		t.Fatal(err)
	}
	qs, err := c.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0] != (Queue{Name: "orders", Type: "quorum", Durable: true, Ready: 4, Unacked: 1, Consumers: 2}) {
		t.Errorf("queues %+v", qs)
	}
	if gotAuth != "ops:s3cret" || gotPath != "/api/queues/%2F" {
		t.Errorf("asked %s as %s", gotPath, gotAuth)
	}
	xs, err := c.Exchanges(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 2 || xs[1] != (Exchange{Name: "orders", Type: "topic", Durable: true}) {
		t.Errorf("exchanges %+v", xs)
	}
	if strings.Contains(c.String(), "s3cret") {
		t.Errorf("String shows the password: %s", c)
	}
}

func TestClientErrors(t *testing.T) {
	for _, bad := range []string{"ftp://x/", "http://", "::"} {
		if _, err := New(bad, "/"); err == nil {
			t.Errorf("New(%q) succeeded", bad)
		}
	}
	if _, err := New("ftp://u:s3cret@x/", "/"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("New with a bad scheme: %v", err)
	}
	// A malformed URL is explained as driver.ParseURL explains it, without
	// the user information (the console reports it so).
	if _, err := New("http://alice:Hunt/er2Secret@127.0.0.1:1/", "/"); err == nil || !strings.Contains(err.Error(), "the password holds a '/'") ||
		strings.Contains(err.Error(), "alice") || strings.Contains(err.Error(), "Secret") {
		t.Errorf("New with a malformed URL: %v", err)
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	c, _ := New(strings.Replace(api.URL, "http://", "http://u:s3cret@", 1), "prod")
	_, err := c.Queues(context.Background())
	if err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a refusing API: %v", err)
	}
	api.Close()
	if _, err := c.Exchanges(context.Background()); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("an API that is gone: %v", err)
	}
}

// TestClientRabbitMQ reads the test broker's management API, when it
// answers on 127.0.0.1:15672.
func TestClientRabbitMQ(t *testing.T) {
	if os.Getenv("ACEMQ_TEST_AMQP_URL") == "" {
		t.Skip("ACEMQ_TEST_AMQP_URL is not set")
	}
	c, err := New("http://guest:guest@127.0.0.1:15672/", "/")
	if err != nil {
		t.Fatal(err)
	}
	xs, err := c.Exchanges(context.Background())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the management API does not answer at 127.0.0.1:15672 (rabbitmq-plugins enable rabbitmq_management): %v", err)
		}
		t.Skipf("the management API does not answer: %v", err)
	}
	found := false
	for _, x := range xs {
		found = found || (x.Name == "amq.topic" && x.Type == "topic" && x.Durable)
	}
	if !found {
		t.Errorf("amq.topic is not among %+v", xs)
	}
	if _, err := c.Queues(context.Background()); err != nil {
		t.Error(err)
	}
}

// The API's answers are read as untrusted input.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`[]`, `[{"name":"q","type":"quorum","messages_ready":3}]`, `{}`, `[{"name":5}]`, `null`, `[{"name":"x","internal":true}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		qs, err := ParseQueues([]byte(body))
		if err == nil && len(qs) > len(body) {
			t.Fatalf("%d queues from %d bytes", len(qs), len(body))
		}
		xs, err := ParseExchanges([]byte(body))
		if err == nil && len(xs) > len(body) {
			t.Fatalf("%d exchanges from %d bytes", len(xs), len(body))
		}
	})
}
