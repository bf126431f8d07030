package route_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/route"
	"github.com/acemq/acemq/topology"
)

type Shipment struct {
	Order string   `json:"order"`
	Trail []string `json:"trail"`
}

// A three-step pipeline: each step's consumer does its work and hands the
// result on; the last step ends the run.
func ExamplePipeline() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://route-example")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)

	p, err := route.NewPipeline(conn, "fulfilment", []string{"validate", "charge", "ship"})
	if err != nil {
		panic(err)
	}
	if err := p.Declare(ctx); err != nil {
		panic(err)
	}
	finished := make(chan acemq.Message[Shipment], 1)
	for _, step := range p.Steps() {
		_, err := route.Step(ctx, p, step, func(_ context.Context, m acemq.Message[Shipment]) (route.Output[Shipment], error) {
			s := m.Payload
			s.Trail = append(s.Trail, step)
			if step == "ship" {
				finished <- acemq.Message[Shipment]{Payload: s, Envelope: m.Envelope}
			}
			return route.Forward(s), nil
		}, acemq.WithRetry(retry.Exponential(3, 100*time.Millisecond, time.Second)))
		if err != nil {
			panic(err)
		}
	}

	runID, err := p.Start(ctx, Shipment{Order: "o-1"})
	if err != nil {
		panic(err)
	}
	m := <-finished
	fmt.Println("trail:", strings.Join(m.Payload.Trail, " -> "))
	fmt.Println("same run:", m.Envelope.Fields().RouteID == runID)
	fmt.Println("route:", m.Envelope.Fields().Route, "position", m.Envelope.Fields().RoutePosition)
	// Output:
	// trail: validate -> charge -> ship
	// same run: true
	// route: [validate charge ship] position 2
}

// An ad-hoc itinerary carried in a JSON routing slip: each stop names its
// own exchange and routing key.
func ExampleStartSlip() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://route-slip-example")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{"resize", "publish"} {
		if err := topology.New().Queue(q).Apply(ctx, conn); err != nil {
			panic(err)
		}
	}
	last := make(chan string, 1)
	for _, q := range []string{"resize", "publish"} {
		_, err := route.Serve(ctx, conn, q, func(_ context.Context, m acemq.Message[string]) (route.Output[string], error) {
			if q == "publish" {
				slip, _ := m.Envelope.Header(wire.HeaderRoutingSlip)
				last <- fmt.Sprint(slip)
			}
			return route.Forward(m.Payload + " " + q + "d"), nil
		})
		if err != nil {
			panic(err)
		}
	}
	slip := route.NewSlip(
		route.Stop{Exchange: "", RoutingKey: "resize", Name: "resize"},
		route.Stop{Exchange: "", RoutingKey: "publish"},
	)
	if _, err := route.StartSlip(ctx, conn, slip, "photo-7"); err != nil {
		panic(err)
	}
	s, _ := route.ParseSlip([]byte(<-last))
	fmt.Println("left:", s.Steps[0].RoutingKey, "done:", s.Done[0].Name)
	// Output:
	// left: publish done: resize
}
