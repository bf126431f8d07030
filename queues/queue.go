// Package queue looks at a queue from outside, for operators and tools:
// Inspect reports its depth and consumers, and a Browser reads its
// messages without a consumer subscription (AMQP basic.get), so that one
// can look at what is in a dead-letter queue, take some of it and move
// some of it elsewhere.
//
//	info, err := queues.Inspect(ctx, conn, "orders.new.dlq")
//	b, err := queues.Browse(ctx, conn, "orders.new.dlq")
//	defer b.Close() // puts back every message still held
//	for {
//		m, ok, err := b.Next(ctx)
//		…
//		err = b.Move(ctx, m, "", "orders.new", m.Envelope)
//	}
//
// Both need a driver that can check a queue passively (driver.Inspector),
// and a Browser one that can fetch without a subscription (driver.Getter);
// both built-in drivers can. A queue that does not exist is an error
// wrapping acemq.ErrNotFound; a driver that cannot is acemq.ErrUnsupported.
package queues

import (
	"context"
	"fmt"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/engine"
)

// Info is what the broker reports about a queue.
type Info struct {
	Name string
	// Messages counts the messages ready for delivery. Messages delivered
	// to a consumer (or held by a Browser) and not yet settled are not
	// among them.
	Messages int
	// Consumers counts the consumers subscribed to the queue.
	Consumers int
}

// Inspect reports the depth and consumers of the queue called name with a
// passive declaration, which creates nothing. A queue that does not exist
// fails with an error wrapping acemq.ErrNotFound. It needs a driver with
// passive checks (driver.Inspector; both built-in drivers have them).
func Inspect(ctx context.Context, conn *acemq.Conn, name string) (Info, error) {
	eng := engine.Of(conn)
	if eng == nil {
		return Info{}, fmt.Errorf("queues: inspecting the queue %q needs a connection", name)
	}
	ins, ok := eng.Inspector()
	if !ok {
		return Info{}, fmt.Errorf("queues: the driver of %s cannot inspect a queue: %w", conn, acemq.ErrUnsupported)
	}
	info, err := ins.InspectQueue(ctx, name)
	if err != nil {
		return Info{}, fmt.Errorf("queues: inspecting the queue %q: %w", name, err)
	}
	return Info{Name: info.Name, Messages: info.Messages, Consumers: info.Consumers}, nil
}
