package console_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/console"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/topology"
)

// Serve the console for an application's queues on a broker without the
// management API. In a program: http.ListenAndServe("127.0.0.1:8484", con).
func ExampleNew() {
	ctx := context.Background()
	defer memory.Reset("memory://console-example")
	conn, err := acemq.Connect(ctx, "memory://console-example")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("orders.new", topology.WithDeadLettering(true)).Apply(ctx, conn); err != nil {
		log.Fatal(err)
	}
	con, err := console.New(conn, console.WithQueues("orders.new"))
	if err != nil {
		log.Fatal(err)
	}
	defer con.Close()

	// The page of the dead-letter queue, as a browser on this machine asks
	// for it.
	rec := httptest.NewRecorder()
	con.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:8484/queues/orders.new.dlq", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output: 200 text/html; charset=utf-8
}
