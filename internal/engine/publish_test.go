package engine

import (
	"context"
	"iter"
	"log/slog"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// fakeDriver records what is published; Publish and PublishEach succeed.
// Nothing else of driver.Conn is called.
type fakeDriver struct {
	driver.Conn
	sent []driver.Message
}

func (d *fakeDriver) Publish(_ context.Context, m driver.Message) error {
	d.sent = append(d.sent, m)
	return nil
}

// eachDriver is a fakeDriver that takes sequences (driver.EachPublisher).
type eachDriver struct{ fakeDriver }

func (d *eachDriver) PublishEach(_ context.Context, ms iter.Seq2[*driver.Message, error], done func(error)) {
	for m, err := range ms {
		if err == nil {
			d.sent = append(d.sent, *m)
		}
		done(err)
	}
}

// fakeTelemetry counts its hooks. observing and carries are what Observing
// and Carries report.
type fakeTelemetry struct {
	observing, carries bool
	started, ended     int
	ids                []Identity
}

func (t *fakeTelemetry) PublishStart(ctx context.Context, m driver.Message, id Identity) (context.Context, driver.Message, func(error, time.Duration)) {
	t.started++
	t.ids = append(t.ids, id)
	m.Headers = driver.Table{"traced": true}
	return ctx, m, func(error, time.Duration) { t.ended++ }
}
func (t *fakeTelemetry) Observing() bool                      { return t.observing }
func (t *fakeTelemetry) Carries(context.Context) bool         { return t.carries }
func (t *fakeTelemetry) Tracing() bool                        { return t.observing }
func (t *fakeTelemetry) MeterProvider() metric.MeterProvider  { return nil }
func (t *fakeTelemetry) TracerProvider() trace.TracerProvider { return nil }

// publishAllWays publishes one message through each of the connection's
// publish paths: PublishAs, PublishIdentified, PublishBatchAs and
// PublishSeq (over a driver that takes sequences and one that does not).
// It returns how many messages were published.
func publishAllWays(t *testing.T, tel *fakeTelemetry) int {
	t.Helper()
	ctx := context.Background()
	m := driver.Message{RoutingKey: "q", MessageID: "m1"}
	id := Identity{ID: "m1", Type: "t"}
	unsent := func(cause error) error { return cause }
	n := 0
	for _, d := range []driver.Conn{&fakeDriver{}, &eachDriver{}} {
		c := NewConn(d, tel, slog.Default(), nil)
		if err := c.PublishAs(ctx, m, id); err != nil {
			t.Fatal(err)
		}
		if err := c.PublishIdentified(ctx, m, func() Identity { return id }); err != nil {
			t.Fatal(err)
		}
		for _, err := range c.PublishBatchAs(ctx, []driver.Message{m}, func(int) Identity { return id }) {
			if err != nil {
				t.Fatal(err)
			}
		}
		PublishSeq(ctx, c, func(yield func(*Draft[string]) bool) {
			yield(&Draft[string]{M: m, Env: "env"})
		}, func(*string) Identity { return id }, unsent, func(env string, err error) {
			if env != "env" || err != nil {
				t.Errorf("PublishSeq result (%q, %v), want (env, nil)", env, err)
			}
		})
		n += 4
		var sent []driver.Message
		switch d := d.(type) {
		case *fakeDriver:
			sent = d.sent
		case *eachDriver:
			sent = d.sent
		}
		if len(sent) != 4 {
			t.Fatalf("%T: %d messages sent, want 4", d, len(sent))
		}
		for _, s := range sent {
			if _, traced := s.Headers["traced"]; traced != (tel.observing || tel.carries) {
				t.Errorf("%T: the telemetry amended the message: %v, want %v", d, traced, tel.observing || tel.carries)
			}
		}
	}
	return n
}

// TestPublishTelemetryOnlyWhenHooked: every publish path goes through the
// telemetry (PublishStart and its end) when something observes publishes
// or the context carries a trace, and skips it otherwise.
func TestPublishTelemetryOnlyWhenHooked(t *testing.T) {
	for _, tc := range []struct {
		name               string
		observing, carries bool
	}{
		{"observing", true, false},
		{"carrying a trace", false, true},
		{"both", true, true},
		{"neither", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tel := &fakeTelemetry{observing: tc.observing, carries: tc.carries}
			n := publishAllWays(t, tel)
			want := 0
			if tc.observing || tc.carries {
				want = n
			}
			if tel.started != want || tel.ended != want {
				t.Errorf("%d publishes: PublishStart called %d times, its end %d, want %d", n, tel.started, tel.ended, want)
			}
			for _, id := range tel.ids {
				if id != (Identity{ID: "m1", Type: "t"}) {
					t.Errorf("PublishStart got identity %+v", id)
				}
			}
		})
	}
}

// TestPublishIdentifiedComputesIdentityOnlyWhenHooked: the identity of
// PublishIdentified is computed only when the telemetry will use it.
func TestPublishIdentifiedComputesIdentityOnlyWhenHooked(t *testing.T) {
	for _, hooked := range []bool{false, true} {
		tel := &fakeTelemetry{observing: hooked}
		d := &fakeDriver{}
		c := NewConn(d, tel, slog.Default(), nil)
		calls := 0
		err := c.PublishIdentified(context.Background(), driver.Message{RoutingKey: "q"}, func() Identity {
			calls++
			return Identity{ID: "x"}
		})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if hooked {
			want = 1
		}
		if calls != want || len(d.sent) != 1 {
			t.Errorf("hooked %v: identity computed %d times, want %d; %d sent, want 1", hooked, calls, want, len(d.sent))
		}
	}
}
