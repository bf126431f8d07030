package console

import (
	"time"

	"github.com/acemq/acemq/topology"
)

// An Option configures New. Every option is a function named With….
type Option interface{ apply(*config) }

type config struct {
	queues     []string
	topology   []*topology.Topology
	mgmtURL    string
	mgmtVhost  string
	token      string
	decoder    BodyDecoder
	peekLimit  int
	peekBudget int
	interval   time.Duration
}

type option func(*config)

func (f option) apply(c *config) { f(c) }

// WithQueues names the application's queues, for a broker whose management
// API is not available (memory://, or RabbitMQ without the plugin). Each
// queue is listed with its dead-letter half ({q}.dlq, {q}.parked) when those
// exist. The names are added to those of WithTopology.
func WithQueues(names ...string) Option {
	return option(func(c *config) { c.queues = append(c.queues, names...) })
}

// WithTopology takes the application's queues from its topology: every
// queue it declares that is not a dead-letter half or a retry rung is an
// application queue, listed with its halves and the rungs the topology
// declares for it. Several WithTopology add up.
func WithTopology(t *topology.Topology) Option {
	return option(func(c *config) {
		if t != nil {
			c.topology = append(c.topology, t)
		}
	})
}

// WithManagement lists the queues of vhost from RabbitMQ's management API
// at url (for example http://guest:guest@127.0.0.1:15672/; the plugin is
// rabbitmq_management), with their rates. The user and password, if any,
// are taken from the URL and never shown. Without it the queues come from
// WithQueues and WithTopology.
func WithManagement(url, vhost string) Option {
	return option(func(c *config) { c.mgmtURL, c.mgmtVhost = url, vhost })
}

// WithToken makes every request carry token: as "Authorization: Bearer
// token", as the cookie the console sets when a page is opened with
// ?token=token, or as that query parameter. Without a token the console
// answers only requests addressed to a loopback host name (localhost,
// 127.0.0.1, [::1]), which keeps out pages that rebind their own name to
// 127.0.0.1; serve it on a loopback address only.
func WithToken(token string) Option { return option(func(c *config) { c.token = token }) }

// WithBodyDecoder decodes a message's body before it is shown (for
// example, decrypts it). It is called for the message detail view and for
// export; a failure is shown beside the body as it travelled.
func WithBodyDecoder(d BodyDecoder) Option { return option(func(c *config) { c.decoder = d }) }

// WithPeekLimit bounds how many messages one look at a queue reads (1000 by
// default). A queue holding more is shown as truncated; replay and delete
// still act on every message of the queue, read or not.
func WithPeekLimit(n int) Option { return option(func(c *config) { c.peekLimit = n }) }

// WithPeekBudget bounds the memory one look at a queue keeps, in bytes
// (DefaultPeekBudget, 8 MiB, by default): the summaries of the messages it
// read (each a few hundred bytes; reasons are cut to 1 KiB), never their
// bodies. A look stops when the next summary would not fit, and the queue
// is shown as truncated. Besides what it keeps, a look holds the message
// it is reading; a message's page holds the one message it shows, and an
// export one message at a time, written as it is read.
func WithPeekBudget(bytes int) Option { return option(func(c *config) { c.peekBudget = bytes }) }

// WithInterval is how often the live view re-reads the queues' depths (2 s
// by default).
func WithInterval(d time.Duration) Option { return option(func(c *config) { c.interval = d }) }
