package rabbitmq

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"
)

// PurgeQueue removes a queue's ready messages (queue.purge) and returns how
// many it removed (driver.Purger).
func (c *conn) PurgeQueue(ctx context.Context, name string) (int, error) {
	var n int
	err := c.withChannel(ctx, func(ch *amqp.Channel) error {
		var err error
		n, err = ch.QueuePurge(name, false)
		return err
	})
	if err != nil {
		return 0, mapErr("purge", "queue", name, err)
	}
	return n, nil
}
