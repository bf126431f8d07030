package actuator_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/actuator"
)

// A program builds the Actuator, connects with its meter provider, watches
// the connection and serves the endpoints (here through httptest; a
// program calls actuator.ListenAndServe(ctx, actuator.DefaultAddr, act)).
func Example() {
	ctx := context.Background()
	act, err := actuator.New(actuator.WithApplication("orders", "1.4.2"))
	if err != nil {
		log.Fatal(err)
	}
	defer act.Shutdown(ctx)
	conn, err := acemq.Connect(ctx, "memory://actuator-example", acemq.WithMeterProvider(act.MeterProvider()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	act.Watch(conn)

	// Publishing to a queue nobody declared fails as unroutable, and is
	// counted.
	_, _ = acemq.NewPublisher[string](conn, "").Send(ctx, "orders.new", "o-1")

	rec := httptest.NewRecorder()
	act.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9464"+actuator.PathMetrics, nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "acemq_publish_total") || strings.HasPrefix(line, "# TYPE acemq_publish_total") {
			fmt.Println(line)
		}
	}
	rec = httptest.NewRecorder()
	act.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9464"+actuator.PathHealth, nil))
	fmt.Println(rec.Code, act.Health(ctx).Status)
	// Output:
	// # TYPE acemq_publish_total counter
	// acemq_publish_total{exchange="",outcome="unroutable",routing_key="orders.new"} 1
	// 200 up
}
