package xml

// An Option configures New. Every option is a function named With…, as
// across the module.
type Option interface{ apply(*Codec) }

type option func(*Codec)

func (f option) apply(c *Codec) { f(c) }

// WithRoot names the root element of an encoded map (default "message").
// Structs name their own with an XMLName field or their type's name.
func WithRoot(name string) Option {
	return option(func(c *Codec) {
		if name != "" {
			c.root = name
		}
	})
}

// WithMaxBodySize sets the largest body, in bytes, the codec reads
// (default DefaultMaxBodySize). New panics on n <= 0.
func WithMaxBodySize(n int) Option {
	return option(func(c *Codec) {
		c.maxBody = n
	})
}

// WithMaxDepth sets how deeply elements may nest in a body read (default
// DefaultMaxDepth). New panics on n <= 0.
func WithMaxDepth(n int) Option {
	return option(func(c *Codec) {
		c.maxDepth = n
	})
}
