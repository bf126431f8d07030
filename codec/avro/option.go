package avro

import "time"

// An Option configures NewFixed and NewRegistered. Every option is a
// function named With…, as across the module.
type Option interface{ apply(*Codec, *config) }

type config struct{ writer string }

type option func(*Codec, *config)

func (f option) apply(c *Codec, cfg *config) { f(c, cfg) }

func apply(c *Codec, opts []Option) config {
	var cfg config
	for _, o := range opts {
		o.apply(c, &cfg)
	}
	return cfg
}

// WithResolve(false) decodes every body in the writer's shape instead of
// resolving the writer's schema to the codec's (the default, true).
func WithResolve(on bool) Option { return option(func(c *Codec, _ *config) { c.resolve = on }) }

// WithWriterSchema gives a fixed-schema codec the schema its producers
// write with, when it differs from the codec's own: bodies are resolved from
// it to the codec's schema. NewRegistered refuses it: a registered body
// names its writer's schema.
func WithWriterSchema(schema string) Option {
	return option(func(_ *Codec, cfg *config) { cfg.writer = schema })
}

// WithTimeout bounds each registry lookup a decode makes (default 10 s).
func WithTimeout(d time.Duration) Option {
	return option(func(c *Codec, _ *config) {
		if d > 0 {
			c.timeout = d
		}
	})
}

// WithMaxBodySize sets the largest body, in bytes, the codec reads
// (default DefaultMaxBodySize). NewFixed and NewRegistered refuse
// n <= 0.
func WithMaxBodySize(n int) Option {
	return option(func(c *Codec, _ *config) {
		c.maxBody = n
	})
}

// WithMaxDepth sets how deeply records, arrays and maps may nest in a body
// (default DefaultMaxDepth); only a recursive schema lets a body choose
// its depth. NewFixed and NewRegistered refuse
// n <= 0.
func WithMaxDepth(n int) Option {
	return option(func(c *Codec, _ *config) {
		c.maxDepth = n
	})
}
