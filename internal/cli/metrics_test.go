package cli

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/spf13/cobra"

	"github.com/acemq/acemq/actuator"
)

// --metrics-addr off loopback makes up a token (printed when serving) and
// the endpoints refuse requests without it; on loopback they need none
// but refuse requests addressed to another name; --metrics-token sets it.
func TestMetricsToken(t *testing.T) {
	status := func(m *metrics, host, auth string) int {
		req := httptest.NewRequest(http.MethodGet, actuator.PathHealth, nil)
		req.Host = host
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		rec := httptest.NewRecorder()
		m.act.ServeHTTP(rec, req)
		return rec.Code
	}
	open := func(args ...string) *metrics {
		t.Helper()
		var addr string
		cmd := &cobra.Command{Use: "serve"}
		AddMetricsFlag(cmd.Flags(), &addr)
		if err := cmd.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		m, err := newMetrics(cmd, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.close)
		return m
	}

	m := open("--metrics-addr", "0.0.0.0:0")
	if !m.made || len(m.token) < 32 {
		t.Fatalf("off loopback: token %q, made %v", m.token, m.made)
	}
	if c := status(m, "10.0.0.5:9464", ""); c != 401 {
		t.Errorf("off loopback without the token: %d", c)
	}
	if c := status(m, "10.0.0.5:9464", m.token); c != 200 {
		t.Errorf("off loopback with the token: %d", c)
	}

	m = open("--metrics-addr", "127.0.0.1:0")
	if m.token != "" {
		t.Errorf("on loopback a token was made: %q", m.token)
	}
	if c := status(m, "127.0.0.1:9464", ""); c != 200 {
		t.Errorf("on loopback: %d", c)
	}
	if c := status(m, "rebound.example:9464", ""); c != 403 {
		t.Errorf("on loopback, addressed to another name: %d", c)
	}

	m = open("--metrics-addr", "0.0.0.0:0", "--metrics-token", "given")
	if m.made || m.token != "given" || status(m, "10.0.0.5:9464", "given") != 200 || status(m, "10.0.0.5:9464", "") != 401 {
		t.Errorf("--metrics-token given: token %q, made %v", m.token, m.made)
	}
}
