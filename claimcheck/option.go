package claimcheck

import "time"

// An Option configures New. Every option is a function named With…, as
// across the module.
type Option interface{ apply(*Codec) }

type option func(*Codec)

func (f option) apply(c *Codec) { f(c) }

// WithThreshold sets the encoded size, in bytes, from which payloads are
// offloaded (default 65,536). 0 offloads every payload; a negative
// threshold is refused by New.
func WithThreshold(n int) Option { return option(func(c *Codec) { c.threshold = n }) }

// WithTimeout bounds each store call (default 30 s). A Get that runs out of
// time is a retryable decode failure; a Put that does, an encode failure.
// A timeout that is not positive is refused by New.
func WithTimeout(d time.Duration) Option { return option(func(c *Codec) { c.timeout = d }) }

// WithKeys replaces the key generator (default: a fresh UUID v4). Every
// generated key must match [A-Za-z0-9][A-Za-z0-9._-]{0,127}; Encode refuses
// one that does not.
func WithKeys(f func() string) Option { return option(func(c *Codec) { c.newKey = f }) }
