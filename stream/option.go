package stream

import (
	"errors"
	"fmt"

	"github.com/acemq/acemq"
)

// An Option configures Read.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

// DefaultPrefetch is a reader's prefetch unless WithPrefetch says otherwise
// (the family's default; docs/wire.md §5.9 leaves it to each library).
const DefaultPrefetch = 10

// DefaultCheckpointEvery is how many settled messages a reader with
// checkpoints waits between saves, unless WithCheckpointEvery says
// otherwise.
const DefaultCheckpointEvery = 100

type config struct {
	offset      Offset
	prefetch    int
	codec       acemq.Codec
	tag         string
	noDeclare   bool
	store       Checkpoints
	name        string
	every       int
	errs        []error
	onCheckFail func(error)
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("stream: "+format, args...))
}

// WithOffset sets where the reader starts (default Next). With
// WithCheckpoints it is where a reader with no checkpoint starts.
func WithOffset(o Offset) Option { return option(func(c *config) { c.offset = o }) }

// WithPrefetch sets how many deliveries the broker hands the reader ahead
// of its handler (default 10). A stream needs at least 1: RabbitMQ refuses a
// stream consumer without one.
func WithPrefetch(n int) Option {
	return option(func(c *config) {
		if n < 1 {
			c.fail("WithPrefetch(%d): a stream reader needs a prefetch of at least 1; the default is %d", n, DefaultPrefetch)
			return
		}
		c.prefetch = n
	})
}

// WithCodec sets the codec the reader decodes with (default acemq.JSON; a
// codec.Composite reads several formats).
func WithCodec(codec acemq.Codec) Option {
	return option(func(c *config) {
		if codec == nil {
			c.fail("WithCodec was given a nil codec: pass acemq.JSON, acemq.Text, acemq.Bytes or a codec of your own")
			return
		}
		c.codec = codec
	})
}

// WithConsumerTag sets the consumer tag (default acemq-{stream}).
func WithConsumerTag(tag string) Option { return option(func(c *config) { c.tag = tag }) }

// WithDeclarations(false) starts the reader without declaring {stream}.dlq
// and {stream}.parked; rejecting or parking a message then waits until
// they exist. The default declares them (and nothing else: never the
// stream itself).
func WithDeclarations(on bool) Option { return option(func(c *config) { c.noDeclare = !on }) }

// WithCheckpoints keeps the reader's position in store under name (a name
// per reader and stream, for example "billing@orders.events"): the reader
// starts after the offset saved there, or at WithOffset's when none is,
// saves every WithCheckpointEvery settled messages and saves once more when
// it closes. After a crash it reads again what it settled since its last
// save: at least once, never a gap.
func WithCheckpoints(store Checkpoints, name string) Option {
	return option(func(c *config) {
		switch {
		case store == nil:
			c.fail("WithCheckpoints was given a nil store: pass &stream.Memory{} or a sqlcheckpoint.Store")
		case name == "":
			c.fail("WithCheckpoints needs a reader name to save the position under")
		default:
			c.store, c.name = store, name
		}
	})
}

// WithCheckpointEvery saves the position every n settled messages (default
// 100); 1 saves after every message, at the cost of a store write each.
func WithCheckpointEvery(n int) Option {
	return option(func(c *config) {
		if n < 1 {
			c.fail("WithCheckpointEvery(%d): save at least every message (1); the default is %d", n, DefaultCheckpointEvery)
			return
		}
		c.every = n
	})
}

// WithOnCheckpointError calls f with every failure to save a checkpoint
// while reading (the reader carries on and tries again at the next save).
func WithOnCheckpointError(f func(error)) Option {
	return option(func(c *config) { c.onCheckFail = f })
}

var errNoHandler = errors.New("stream: Read needs a handler")
