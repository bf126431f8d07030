package acemq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/testenv"
	"go.opentelemetry.io/otel/codes"
)

// TestFaultTelemetryBlocked raises a memory alarm on RabbitMQ: the
// connection's blocked event is counted, a publish is refused with an error
// span, and Health reports up with the blocked detail without probing.
func TestFaultTelemetryBlocked(t *testing.T) {
	testenv.Faults(t)
	r := newTelRig(t, testenv.AMQPURL(t))
	t.Cleanup(func() { testenv.Rabbitmqctl(t, "set_vm_memory_high_watermark", "0.4") })
	testenv.Rabbitmqctl(t, "set_vm_memory_high_watermark", "0.0000001")

	// RabbitMQ blocks a connection only when it publishes during the
	// alarm: keep publishing (each bounded) until it is blocked.
	var triggers sync.WaitGroup
	defer triggers.Wait()
	p := acemq.NewPublisher[string](r.c, "")
	testenv.Eventually(t, "the connection to be blocked", func() bool {
		if b, _ := r.c.Blocked(); b {
			return true
		}
		triggers.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, _ = p.Send(ctx, r.q, "trigger")
		})
		time.Sleep(200 * time.Millisecond)
		return false
	})
	_, reason := r.c.Blocked()
	ctx, app := r.tel.tp.Tracer("test").Start(context.Background(), "app")
	_, err := p.Send(ctx, r.q, "refused")
	app.End()
	if !errors.Is(err, acemq.ErrBlocked) {
		t.Fatalf("Send while blocked: %v, want ErrBlocked", err)
	}
	pub := r.spanFor(r.q+" publish", app.SpanContext())
	wantAttr(t, pub, "messaging.acemq.outcome", "refused")
	if pub.Status().Code != codes.Error {
		t.Errorf("refused publish span status %v", pub.Status())
	}
	if got := r.tel.count(t, "acemq.publish.total", map[string]string{"exchange": "", "routing.key": r.q, "outcome": "refused"}); got < 1 {
		t.Errorf("refused publishes %d (series %v)", got, r.tel.series(t, "acemq.publish.total"))
	}
	r.wantCount("acemq.connection.events", map[string]string{"event": "blocked"}, 1)
	h := r.c.Health(context.Background())
	if h.Status != acemq.HealthUp || h.Detail != contract.BlockedDetail+reason || h.Parts["roundTripMillis"] != nil {
		t.Errorf("health while blocked: %+v", h)
	}

	testenv.Rabbitmqctl(t, "set_vm_memory_high_watermark", "0.4")
	testenv.Eventually(t, "the connection to be unblocked", func() bool { b, _ := r.c.Blocked(); return !b })
	r.wantCount("acemq.connection.events", map[string]string{"event": "unblocked"}, 1)
}

// TestFaultTelemetryRecovery closes every connection on RabbitMQ: the lost
// and recovered events are counted, Health is down or up meanwhile, never
// degraded, and up once recovered.
func TestFaultTelemetryRecovery(t *testing.T) {
	testenv.Faults(t)
	r := newTelRig(t, testenv.AMQPURL(t))
	r.consume(func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() })
	testenv.Rabbitmqctl(t, "close_all_connections", "acemq telemetry fault test")
	testenv.Eventually(t, "lost and recovered events", func() bool {
		return r.tel.count(t, "acemq.connection.events", map[string]string{"event": "lost"}) >= 1 &&
			r.tel.count(t, "acemq.connection.events", map[string]string{"event": "recovered"}) >= 1
	})
	testenv.Eventually(t, "health up after recovery", func() bool {
		h := r.c.Health(context.Background())
		if h.Status == acemq.HealthDegraded {
			t.Fatalf("a recovered consumer was reported stopped: %+v", h)
		}
		return h.Status == acemq.HealthUp && h.Parts["consumers"] == 1
	})
	r.publish("after")
	if s := r.wait(1)[0]; s.Outcome != acemq.OutcomeAcked {
		t.Errorf("after recovery: %+v", s)
	}
}
