package avro

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/media"
	hamba "github.com/hamba/avro/v2"
)

// Content types (docs/wire.md §4.3).
const (
	// ContentTypeRegistered is written by a registered codec.
	ContentTypeRegistered = "application/vnd.acemq.avro"
	// ContentTypeFixed is written by a fixed-schema codec.
	ContentTypeFixed = "avro/binary"
)

// alsoRead are the content types both modes read, and the suffix.
var (
	alsoRead = []string{"application/avro"}
	suffix   = []string{"+avro"}
)

// frameLen is the registry frame: 0x00 and a 4-byte schema id.
const frameLen = 5

// DefaultTimeout bounds each registry lookup a decode makes.
const DefaultTimeout = 10 * time.Second

// The codec's bounds (WithMaxBodySize and WithMaxDepth change them).
const (
	// DefaultMaxBodySize is the largest body the codec reads: 256 KiB.
	DefaultMaxBodySize = 256 << 10
	// DefaultMaxDepth is how deeply records, arrays and maps may nest
	// (what a recursive schema allows): 128.
	DefaultMaxDepth = 128
)

// Codec is an Avro codec, registered or fixed-schema. It implements
// acemq.Codec and is safe for concurrent use.
type Codec struct {
	registered bool
	reg        *Registry
	schema     hamba.Schema // the codec's own: written with, read into
	id         uint32       // a registered codec's schema id
	writer     hamba.Schema // a fixed codec's writer schema, when it differs
	writerRes  hamba.Schema // writer resolved to schema
	resolve    bool
	timeout    time.Duration
	maxBody    int
	maxDepth   int

	compat   *hamba.SchemaCompatibility
	resolved sync.Map // schema id → schemas: the writer's, and resolved to the codec's
}

// schemas are a registered body's writer's schema, which the body check
// walks, and the schema it is decoded with.
type schemas struct{ writer, decode hamba.Schema }

// NewFixed returns a fixed-schema codec: it writes avro/binary bodies in
// schema and reads them in schema. WithWriterSchema names a different
// writer's schema to resolve from.
func NewFixed(schema string, opts ...Option) (*Codec, error) {
	s, err := parse(schema)
	if err != nil {
		return nil, fmt.Errorf("avro: %w", err)
	}
	c := &Codec{schema: s, resolve: true, timeout: DefaultTimeout, maxBody: DefaultMaxBodySize, maxDepth: DefaultMaxDepth, compat: hamba.NewSchemaCompatibility()}
	cfg := apply(c, opts)
	if err := c.checkBounds(); err != nil {
		return nil, err
	}
	if cfg.writer != "" {
		w, err := parse(cfg.writer)
		if err != nil {
			return nil, fmt.Errorf("avro: the writer's schema: %w", err)
		}
		c.writer = w
		if c.writerRes, err = c.compat.Resolve(s, w); err != nil {
			return nil, fmt.Errorf("avro: the writer's schema does not resolve to the reader's: %w", err)
		}
	}
	return c, nil
}

// NewRegistered returns a registered codec over reg. With a schema, it
// registers it (idempotently) and writes every body framed with its id;
// it reads any schema id reg knows, in schema's shape (resolved) unless
// WithResolve(false). With schema "", it only reads, in the writer's shape.
func NewRegistered(ctx context.Context, reg *Registry, schema string, opts ...Option) (*Codec, error) {
	if reg == nil {
		return nil, errors.New("avro: NewRegistered needs a Registry, for example avro.NewRegistry(avro.NewMemoryStore())")
	}
	c := &Codec{registered: true, reg: reg, resolve: true, timeout: DefaultTimeout, maxBody: DefaultMaxBodySize, maxDepth: DefaultMaxDepth, compat: hamba.NewSchemaCompatibility()}
	cfg := apply(c, opts)
	if cfg.writer != "" {
		return nil, errors.New("avro: WithWriterSchema is for fixed-schema codecs; a registered codec finds the writer's schema by id")
	}
	if err := c.checkBounds(); err != nil {
		return nil, err
	}
	if schema != "" {
		id, err := reg.Register(ctx, schema)
		if err != nil {
			return nil, err
		}
		c.id = id
		c.schema, _ = reg.schema(ctx, id)
	}
	return c, nil
}

// checkBounds refuses the bounds of WithMaxBodySize and WithMaxDepth when
// either is zero or less.
func (c *Codec) checkBounds() error {
	if c.maxBody <= 0 || c.maxDepth <= 0 {
		return fmt.Errorf("avro: the bounds must be positive, not a body size of %d and a depth of %d", c.maxBody, c.maxDepth)
	}
	return nil
}

// SchemaID is a registered codec's schema id (0 for a fixed or read-only
// codec).
func (c *Codec) SchemaID() uint32 { return c.id }

// ContentType is application/vnd.acemq.avro for a registered codec,
// avro/binary for a fixed one.
func (c *Codec) ContentType() string {
	if c.registered {
		return ContentTypeRegistered
	}
	return ContentTypeFixed
}

// Accepts reports whether the codec reads contentType: its own, or
// application/avro or *+avro. A fixed codec never accepts
// application/vnd.acemq.avro, nor a registered one avro/binary.
func (c *Codec) Accepts(contentType string) bool {
	return media.Type(contentType) == c.ContentType() || media.Matches(contentType, alsoRead, suffix)
}

// Encode writes v in the codec's schema, framed with its id when
// registered.
func (c *Codec) Encode(v any) ([]byte, error) {
	if c.schema == nil {
		return nil, errors.New("avro: this registered codec was made without a schema and only reads")
	}
	b, err := api(0).Marshal(c.schema, v)
	if err != nil {
		return nil, fmt.Errorf("avro: encoding a %T: %w", v, err)
	}
	if !c.registered {
		return b, nil
	}
	out := make([]byte, frameLen, frameLen+len(b))
	binary.BigEndian.PutUint32(out[1:], c.id)
	return append(out, b...), nil
}

// SchemaIDOf returns the schema id of a registry-framed body. ok is false
// when body is too short or does not begin with 0x00.
func SchemaIDOf(body []byte) (id uint32, ok bool) {
	if len(body) < frameLen || body[0] != 0 {
		return 0, false
	}
	return binary.BigEndian.Uint32(body[1:frameLen]), true
}

// Decode reads body into v. The content type decides the framing:
// application/vnd.acemq.avro is registry-framed, avro/binary is raw; for
// application/avro and *+avro a leading 0x00 with room for an id means
// framed. A registered codec reads framed bodies by their schema id (and raw
// ones in its own schema); a fixed codec reads raw bodies only.
//
// The body must hold exactly one value: a truncated body, or bytes after the
// value, are refused, as are a body over the codec's size bound and
// records, arrays and maps nested deeper than its depth bound (a recursive
// schema); all of it is checked by walking the body against the writer's
// schema before hamba/avro decodes it.
//
// Failures are *acemq.DecodeError: retryable only when the registry's store
// could not be read.
func (c *Codec) Decode(body []byte, contentType string, v any) error {
	if len(body) > c.maxBody {
		return &acemq.DecodeError{ContentType: contentType, Err: &acemq.LimitError{Codec: "avro", Size: len(body), Limit: c.maxBody}}
	}
	mt := media.Type(contentType)
	framed := false
	switch {
	case mt == ContentTypeRegistered:
		framed = true
	case mt == ContentTypeFixed:
	default:
		_, framed = SchemaIDOf(body)
	}
	if !c.registered {
		if framed {
			return &acemq.DecodeError{ContentType: contentType, Err: errors.New("the body is registry-framed (0x00 and a schema id), and a fixed-schema Avro codec does not read it: use a registered codec (avro.NewRegistered)")}
		}
		s, w := c.schema, c.schema
		switch {
		case c.writer != nil && c.resolve:
			s, w = c.writerRes, c.writer
		case c.writer != nil:
			s, w = c.writer, c.writer
		}
		return c.unmarshal(w, s, body, contentType, v)
	}
	if !framed {
		if c.schema == nil {
			return &acemq.DecodeError{ContentType: contentType, Err: errors.New("the body is raw Avro (no registry frame), and this codec has no schema to read it with")}
		}
		return c.unmarshal(c.schema, c.schema, body, contentType, v)
	}
	id, ok := SchemaIDOf(body)
	if !ok {
		return &acemq.DecodeError{ContentType: contentType, Err: fmt.Errorf("the body is %d bytes and does not begin with 0x00 and a 4-byte schema id", len(body))}
	}
	s, err := c.writerSchema(id)
	if err != nil {
		return &acemq.DecodeError{ContentType: contentType, Retryable: !errors.Is(err, ErrNotFound) && !isParseError(err), Err: err}
	}
	return c.unmarshal(s.writer, s.decode, body[frameLen:], contentType, v)
}

type parseError struct{ error }

func isParseError(err error) bool { var p parseError; return errors.As(err, &p) }

// writerSchema returns the writer's schema of id and the schema to decode
// a body of it with: the writer's resolved to the codec's, or the writer's
// own.
func (c *Codec) writerSchema(id uint32) (schemas, error) {
	if s, ok := c.resolved.Load(id); ok {
		return s.(schemas), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	w, err := c.reg.schema(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return schemas{}, fmt.Errorf("the body names schema id %d, which the registry does not hold: %w", id, err)
	}
	if err != nil {
		return schemas{}, fmt.Errorf("the schema registry could not be read for schema id %d (retried through the consumer's retry policy): %w", id, err)
	}
	s := schemas{writer: w, decode: w}
	if c.resolve && c.schema != nil {
		if s.decode, err = c.compat.Resolve(c.schema, w); err != nil {
			return schemas{}, parseError{fmt.Errorf("the writer's schema %d does not resolve to this codec's schema: %w", id, err)}
		}
	}
	c.resolved.Store(id, s)
	return s, nil
}

// unmarshal checks data against the writer's schema w, then decodes it with
// s.
func (c *Codec) unmarshal(w, s hamba.Schema, data []byte, ct string, v any) error {
	if err := c.checkBody(w, data, ct); err != nil {
		return err
	}
	if err := api(len(data)).Unmarshal(s, data, v); err != nil {
		return &acemq.DecodeError{ContentType: ct, Err: fmt.Errorf("not Avro in the expected schema: %w", err)}
	}
	return nil
}

// apis holds one frozen configuration per power-of-two body size, whose
// limits no honest body of that size exceeds: a string, byte string or
// array cannot claim more than the body's length (arrays of nulls aside).
var apis sync.Map // int (log2 size) → hamba.API

// api returns the configuration for a body of n bytes (0: encoding, no
// limits).
func api(n int) hamba.API {
	if n == 0 {
		return hamba.DefaultConfig
	}
	tier := bits.Len(uint(n)) // 2^tier > n
	tier = max(tier, 10)
	if a, ok := apis.Load(tier); ok {
		return a.(hamba.API)
	}
	limit := 1 << tier
	a, _ := apis.LoadOrStore(tier, hamba.Config{MaxByteSliceSize: limit, MaxSliceAllocSize: limit}.Freeze())
	return a.(hamba.API)
}
