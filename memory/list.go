package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/acemq/acemq/driver"
)

// ListQueues returns the broker's queues, sorted by name, with their ready
// messages and consumers (driver.Lister).
func (c *conn) ListQueues(ctx context.Context) ([]driver.QueueListing, error) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := c.check(ctx, "list queues"); err != nil {
		return nil, err
	}
	out := make([]driver.QueueListing, 0, len(b.queues))
	for _, q := range b.queues {
		b.dispatch(q)
		info := q.info()
		out = append(out, driver.QueueListing{
			Queue:    driver.Queue{Name: q.name, Durable: q.durable, Exclusive: q.exclusive, AutoDelete: q.autoDelete, Args: cloneTable(q.args)},
			Messages: info.Messages, Consumers: info.Consumers,
		})
	}
	slices.SortFunc(out, func(a, b driver.QueueListing) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ListExchanges returns the broker's named exchanges, sorted by name
// (driver.Lister).
func (c *conn) ListExchanges(ctx context.Context) ([]driver.Exchange, error) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := c.check(ctx, "list exchanges"); err != nil {
		return nil, err
	}
	out := make([]driver.Exchange, 0, len(b.exchanges))
	for _, ex := range b.exchanges {
		out = append(out, driver.Exchange{Name: ex.name, Kind: ex.kind, Durable: ex.durable, AutoDelete: ex.autoDelete, Internal: ex.internal, Args: cloneTable(ex.args)})
	}
	slices.SortFunc(out, func(a, b driver.Exchange) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// PurgeQueue removes a queue's ready messages, as queue.purge does, and
// returns how many (driver.Purger). A stream cannot be purged.
func (c *conn) PurgeQueue(ctx context.Context, name string) (int, error) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := c.check(ctx, "purge queue "+strconv.Quote(name)); err != nil {
		return 0, err
	}
	q, err := c.lookupQueue(name)
	if err != nil {
		return 0, err
	}
	if q.stream != nil {
		return 0, fmt.Errorf("memory: the queue %q is a stream, which cannot be purged: %w", name, errors.ErrUnsupported)
	}
	n := len(q.msgs)
	clear(q.msgs)
	q.msgs = q.msgs[:0]
	q.stopTimer()
	return n, nil
}
