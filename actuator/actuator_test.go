package actuator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/actuator"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/telemetry"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, h http.Handler, path string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:9464"+path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Result().Header, string(b)
}

// traffic connects with the actuator's meter provider, declares a queue and
// runs one acked, one dead-lettered and one unroutable publish through it,
// plus a confirmed publish whose routing key needs escaping.
func traffic(t *testing.T, act *actuator.Endpoints, url string) (*acemq.Conn, string) {
	t.Helper()
	ctx := context.Background()
	c, err := acemq.Connect(ctx, url, acemq.WithMeterProvider(act.MeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	q := fmt.Sprintf("acemq.act.%d", time.Now().UnixNano())
	if _, err := brokertest.Driver(c).DeclareQueue(ctx, driver.Queue{Name: q, Durable: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{q, contract.DeadLetterQueue(q), contract.ParkedQueue(q)} {
			_, _ = brokertest.Driver(c).DeleteQueue(context.Background(), n)
		}
	})
	settled := make(chan acemq.Settlement, 10)
	c.OnSettle(func(s acemq.Settlement) { settled <- s })
	k, err := acemq.Consume(ctx, c, q, func(_ context.Context, m acemq.Message[string]) acemq.Ack {
		if m.Payload == "bad" {
			return acemq.Retry(errors.New("no"))
		}
		return acemq.Accept()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	p := acemq.NewPublisher[string](c, "")
	for _, body := range []string{"good", "bad"} {
		if _, err := p.Send(ctx, q, body); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		select {
		case <-settled:
		case <-time.After(20 * time.Second):
			t.Fatal("no settlement within 20s")
		}
	}
	if _, err := p.Send(ctx, q+".nowhere", "lost"); err == nil {
		t.Fatal("an unroutable publish succeeded")
	}
	weird := `we"ird\key{a=b}` + "\n"
	if _, err := acemq.NewPublisher[string](c, "", acemq.WithMandatory(false)).Send(ctx, weird, "x"); err != nil {
		t.Fatal(err)
	}
	return c, q
}

func TestMetricsEndpoint(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		act, err := actuator.New()
		if err != nil {
			t.Fatal(err)
		}
		defer act.Shutdown(context.Background())
		_, q := traffic(t, act, url)

		code, hdr, body := get(t, act, actuator.PathMetrics)
		if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
			t.Fatalf("GET %s: %d %s\n%s", actuator.PathMetrics, code, hdr.Get("Content-Type"), body)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
		if err != nil {
			t.Fatalf("the exposition does not parse: %v\n%s", err, body)
		}
		want := map[string]dto.MetricType{
			"acemq_publish_total":                dto.MetricType_COUNTER,
			"acemq_publish_duration":             dto.MetricType_HISTOGRAM,
			"acemq_consume_total":                dto.MetricType_COUNTER,
			"acemq_consume_duration":             dto.MetricType_HISTOGRAM,
			"acemq_consume_attempts":             dto.MetricType_HISTOGRAM,
			"acemq_consume_in_flight":            dto.MetricType_GAUGE,
			"acemq_messages_dead_lettered_total": dto.MetricType_COUNTER,
		}
		for name, typ := range want {
			f, ok := fams[name]
			if !ok {
				t.Errorf("no family %s in\n%s", name, body)
				continue
			}
			if f.GetType() != typ {
				t.Errorf("%s is a %v, want %v", name, f.GetType(), typ)
			}
			if n := strings.Count(body, "# TYPE "+name+" "); n != 1 {
				t.Errorf("%d TYPE lines for %s", n, name)
			}
		}
		for name := range fams {
			if !strings.HasPrefix(name, "acemq_") {
				t.Errorf("a family that is not the library's: %s", name)
			}
			if strings.HasSuffix(name, "_seconds") || strings.HasSuffix(name, "_total_total") {
				t.Errorf("the exporter added a suffix: %s", name)
			}
		}
		if strings.Contains(body, "otel_scope") || strings.Contains(body, "target_info") {
			t.Errorf("the exposition carries OpenTelemetry scope or target info:\n%s", body)
		}

		labels := func(m *dto.Metric) map[string]string {
			out := map[string]string{}
			for _, l := range m.GetLabel() {
				out[l.GetName()] = l.GetValue()
			}
			return out
		}
		find := func(fam string, want map[string]string) *dto.Metric {
			for _, m := range fams[fam].GetMetric() {
				if fmt.Sprint(labels(m)) == fmt.Sprint(want) {
					return m
				}
			}
			t.Errorf("%s has no series %v", fam, want)
			return nil
		}
		if m := find("acemq_publish_total", map[string]string{"exchange": "", "routing_key": q, "outcome": "confirmed"}); m != nil && m.GetCounter().GetValue() != 2 {
			t.Errorf("confirmed publishes %v, want 2", m.GetCounter().GetValue())
		}
		find("acemq_publish_total", map[string]string{"exchange": "", "routing_key": q + ".nowhere", "outcome": "unroutable"})
		find("acemq_publish_total", map[string]string{"exchange": "", "routing_key": `we"ird\key{a=b}` + "\n", "outcome": "confirmed"})
		find("acemq_consume_total", map[string]string{"queue": q, "outcome": "acked"})
		find("acemq_consume_total", map[string]string{"queue": q, "outcome": "dead_lettered"})
		find("acemq_messages_dead_lettered_total", map[string]string{"queue": q, "outcome": "dead_lettered"})
		find("acemq_consume_in_flight", map[string]string{"queue": q})
		if m := find("acemq_publish_duration", map[string]string{"exchange": "", "routing_key": q, "outcome": "confirmed"}); m != nil {
			var bounds []float64
			for _, b := range m.GetHistogram().GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
			if wantB := append(telemetry.DurationBuckets(), math.Inf(1)); fmt.Sprint(bounds) != fmt.Sprint(wantB) {
				t.Errorf("duration buckets %v, want %v", bounds, wantB)
			}
			if m.GetHistogram().GetSampleCount() != 2 {
				t.Errorf("duration count %d", m.GetHistogram().GetSampleCount())
			}
		}
		if m := find("acemq_consume_attempts", map[string]string{"queue": q}); m != nil {
			if n := len(m.GetHistogram().GetBucket()); n != 11 {
				t.Errorf("%d attempt buckets, want 11 (1 to 10, +Inf)", n)
			}
		}
	})
}

func TestHealthEndpoint(t *testing.T) {
	act, err := actuator.New()
	if err != nil {
		t.Fatal(err)
	}
	defer act.Shutdown(context.Background())
	report := func() (int, map[string]any) {
		t.Helper()
		code, hdr, body := get(t, act, actuator.PathHealth)
		if hdr.Get("Content-Type") != "application/json" {
			t.Errorf("content type %q", hdr.Get("Content-Type"))
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		for _, k := range []string{"status", "detail", "checked", "parts"} {
			if _, ok := m[k]; !ok {
				t.Errorf("the report has no %q: %s", k, body)
			}
		}
		return code, m
	}
	if code, m := report(); code != 200 || m["status"] != "unknown" {
		t.Errorf("nothing watched: %d %v", code, m)
	}
	c, err := acemq.Connect(context.Background(), brokertest.MemoryURL(t), acemq.WithName("orders"))
	if err != nil {
		t.Fatal(err)
	}
	act.Watch(c)
	code, m := report()
	if code != 200 || m["status"] != "up" {
		t.Errorf("a live connection: %d %v", code, m)
	}
	part, _ := m["parts"].(map[string]any)["orders"].(map[string]any)
	if part["status"] != "up" || part["detail"] == "" {
		t.Errorf("the connection's part %v", part)
	}
	act.AddHealthCheck("cache", actuator.HealthFunc(func(context.Context) acemq.HealthReport {
		return acemq.HealthReport{Status: acemq.HealthDegraded, Detail: "slow"}
	}))
	if code, m := report(); code != 200 || m["status"] != "degraded" {
		t.Errorf("degraded is 200: %d %v", code, m)
	}
	_ = c.Close(context.Background())
	if code, m := report(); code != http.StatusServiceUnavailable || m["status"] != "down" {
		t.Errorf("a closed connection: %d %v", code, m)
	}
}

func TestInfoEndpoint(t *testing.T) {
	act, err := actuator.New(actuator.WithApplication("orders", "1.4.2"))
	if err != nil {
		t.Fatal(err)
	}
	defer act.Shutdown(context.Background())
	c, err := acemq.Connect(context.Background(), brokertest.MemoryURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	act.Watch(c)
	code, _, body := get(t, act, actuator.PathInfo)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var info struct {
		Library        string          `json:"library"`
		LibraryVersion string          `json:"libraryVersion"`
		Name           string          `json:"name"`
		Version        string          `json:"version"`
		Transport      map[string]bool `json:"transport"`
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		t.Fatal(err)
	}
	if info.Library != "acemq-go" || info.LibraryVersion == "" || info.Name != "orders" || info.Version != "1.4.2" {
		t.Errorf("info %s", body)
	}
	caps := brokertest.Driver(c).Capabilities()
	want := map[string]bool{
		"publisher-confirms": caps.PublisherConfirms, "dead-lettering": caps.DeadLettering,
		"quorum-queues": caps.QuorumQueues, "streams": caps.Streams, "recovery": caps.Recovery,
		"transactions": false, "priority": true, "delayed-delivery": caps.DeadLettering,
	}
	if fmt.Sprint(info.Transport) != fmt.Sprint(want) {
		t.Errorf("transport %v, want %v", info.Transport, want)
	}
	if code, _, _ := get(t, act, "/elsewhere"); code != http.StatusNotFound {
		t.Errorf("an unknown path answers %d", code)
	}
}

func TestServe(t *testing.T) {
	act, err := actuator.New()
	if err != nil {
		t.Fatal(err)
	}
	defer act.Shutdown(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- actuator.Serve(ctx, ln, act) }()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + ln.Addr().String() + actuator.PathInfo)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	client.CloseIdleConnections()
	if resp.StatusCode != 200 {
		t.Errorf("status %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
	// A taken port is reported.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	if err := actuator.ListenAndServe(context.Background(), ln2.Addr().String(), act); err == nil {
		t.Errorf("ListenAndServe on a taken port returned nil")
	}
}

// A page that points its own name at 127.0.0.1 (DNS rebinding) cannot read
// the endpoints: without a token only requests addressed to a loopback
// name are answered.
func TestForeignHostRefused(t *testing.T) {
	ep, err := actuator.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{actuator.PathHealth, actuator.PathInfo, actuator.PathMetrics} {
		for host, want := range map[string]int{
			"127.0.0.1:9464": 200, "localhost:9464": 200, "[::1]:9464": 200, "LOCALHOST": 200, "127.0.0.2": 200,
			"evil.example:9464": 403, "evil.example": 403, "10.0.0.1:9464": 403, "": 403, "127.0.0.1.evil.example": 403,
		} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.Host = host
			rec := httptest.NewRecorder()
			ep.ServeHTTP(rec, req)
			if rec.Code != want {
				t.Errorf("%s with Host %q: %d, want %d", path, host, rec.Code, want)
			}
			if want == 403 && strings.Contains(rec.Body.String(), "status") {
				t.Errorf("%s with Host %q answered %q", path, host, rec.Body)
			}
		}
	}
}

// With a token, every request must carry it, whatever name it is
// addressed to; then any name is answered.
func TestTokenOffLoopback(t *testing.T) {
	ep, err := actuator.New(actuator.WithToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host, auth string
		want       int
	}{
		{"metrics.internal:9464", "Bearer s3cret", 200},
		{"127.0.0.1:9464", "Bearer s3cret", 200},
		{"metrics.internal:9464", "", 401},
		{"127.0.0.1:9464", "", 401}, // loopback does not excuse a missing token
		{"metrics.internal:9464", "Bearer wrong", 401},
		{"metrics.internal:9464", "s3cret", 401},
		{"metrics.internal:9464", "Basic czNjcmV0", 401},
	} {
		req := httptest.NewRequest(http.MethodGet, actuator.PathHealth, nil)
		req.Host = c.host
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		rec := httptest.NewRecorder()
		ep.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("Host %q, Authorization %q: %d, want %d", c.host, c.auth, rec.Code, c.want)
		}
		if c.want == 401 && rec.Header().Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("a 401 without WWW-Authenticate: Bearer: %v", rec.Header())
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{actuator.DefaultAddr: true, "localhost:9464": true, "[::1]:9464": true, "0.0.0.0:9464": false, ":9464": false, "10.1.2.3:9464": false} {
		if got := actuator.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %t, want %t", addr, got, want)
		}
	}
}
