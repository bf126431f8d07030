// Package claimcheck keeps large payloads out of the broker: a codec that
// wraps any acemq.Codec, puts an encoded payload of 64 KiB or more in a
// Store and sends only its key, and reads both kinds of body back.
//
// Every body the codec writes is framed (docs/wire.md §4.1):
//
//	0xAC 0x01 0x00 <the wrapped codec's bytes>    inline, below the threshold
//	0xAC 0x01 0x01 <key, bare UTF-8>              stored, at or above it
//
// The content type is the wrapped codec's, unchanged. Reading dispatches on
// the first three bytes, never on a header; a body without the frame is
// handed to the wrapped codec untouched, so messages from producers that do
// not use the claim check still read.
//
// The x-acemq-claim header is not involved: it is an application-owned
// location for operators (acemq.Fields.Claim) and the codec neither
// writes nor reads it.
package claimcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/google/uuid"
)

// Frame bytes (docs/wire.md §4.1).
const (
	Magic   byte = 0xAC
	Version byte = 0x01
	Inline  byte = 0x00
	Stored  byte = 0x01
)

// DefaultThreshold is the encoded size, in bytes, from which a payload is
// offloaded to the store: 65,536 (64 KiB).
const DefaultThreshold = 65536

// DefaultTimeout bounds each store call the codec makes. Codec.Encode and
// Codec.Decode take no context, so the codec makes its own.
const DefaultTimeout = 30 * time.Second

var (
	inlinePrefix = []byte{Magic, Version, Inline}
	storedPrefix = []byte{Magic, Version, Stored}
)

// Codec is the claim-check codec. It implements acemq.Codec and is safe for
// concurrent use. Build one with New.
type Codec struct {
	inner     acemq.Codec
	store     Store
	threshold int
	timeout   time.Duration
	newKey    func() string
}

// New returns a claim-check codec that encodes with inner and offloads
// large payloads to store.
func New(inner acemq.Codec, store Store, opts ...Option) (*Codec, error) {
	if inner == nil {
		return nil, errors.New("claimcheck: New needs the codec to wrap, for example acemq.JSON")
	}
	if store == nil {
		return nil, errors.New("claimcheck: New needs a Store, for example claimcheck.NewMemoryStore() or NewDirStore(dir)")
	}
	c := &Codec{inner: inner, store: store, threshold: DefaultThreshold, timeout: DefaultTimeout, newKey: uuid.NewString}
	for _, o := range opts {
		o.apply(c)
	}
	if c.threshold < 0 {
		return nil, fmt.Errorf("claimcheck: the threshold must be 0 (offload everything) or more, not %d", c.threshold)
	}
	if c.timeout <= 0 {
		return nil, fmt.Errorf("claimcheck: the store timeout must be positive, not %s", c.timeout)
	}
	if c.newKey == nil {
		c.newKey = uuid.NewString
	}
	return c, nil
}

// Must is New for arguments known to be valid; it panics on an error.
func Must(inner acemq.Codec, store Store, opts ...Option) *Codec {
	c, err := New(inner, store, opts...)
	if err != nil {
		panic(err)
	}
	return c
}

// Threshold is the encoded size from which payloads are offloaded.
func (c *Codec) Threshold() int { return c.threshold }

// Store is the store payloads are offloaded to.
func (c *Codec) Store() Store { return c.store }

// ContentType is the wrapped codec's content type.
func (c *Codec) ContentType() string { return c.inner.ContentType() }

// Accepts is the wrapped codec's answer.
func (c *Codec) Accepts(contentType string) bool { return c.inner.Accepts(contentType) }

// Encode encodes v with the wrapped codec. An encoding shorter than the
// threshold travels inline behind 0xAC 0x01 0x00; one at or above it is put
// in the store under a fresh key and the body is 0xAC 0x01 0x01 followed by
// the key. A store that fails fails the encode: nothing is published.
func (c *Codec) Encode(v any) ([]byte, error) {
	b, err := c.inner.Encode(v)
	if err != nil {
		return nil, err
	}
	if len(b) < c.threshold {
		out := make([]byte, 0, len(inlinePrefix)+len(b))
		out = append(out, inlinePrefix...)
		return append(out, b...), nil
	}
	key := c.newKey()
	if !ValidKey(key) {
		return nil, fmt.Errorf("claimcheck: the key generator made %q, which is not a valid key", key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := c.store.Put(ctx, key, b); err != nil {
		return nil, fmt.Errorf("claimcheck: storing a %d-byte payload under %q: %w", len(b), key, err)
	}
	out := make([]byte, 0, len(storedPrefix)+len(key))
	out = append(out, storedPrefix...)
	return append(out, key...), nil
}

// Decode reads body into v by its first three bytes: an inline frame is
// decoded by the wrapped codec without its frame; a stored frame fetches the
// payload from the store and decodes that; any other body is handed to the
// wrapped codec untouched.
//
// A key the store holds nothing for is not retryable (the consumer parks the
// message): the payload was removed, typically by retention, and waiting
// will not bring it back. A store that fails or does not answer within the
// timeout is retryable, and the consumer's retry policy applies. Both are
// *acemq.DecodeError.
func (c *Codec) Decode(body []byte, contentType string, v any) error {
	switch {
	case bytes.HasPrefix(body, inlinePrefix):
		return c.inner.Decode(body[len(inlinePrefix):], contentType, v)
	case bytes.HasPrefix(body, storedPrefix):
		data, err := c.fetch(body[len(storedPrefix):], contentType)
		if err != nil {
			return err
		}
		return c.inner.Decode(data, contentType, v)
	}
	return c.inner.Decode(body, contentType, v)
}

func (c *Codec) fetch(rawKey []byte, ct string) ([]byte, error) {
	key := string(rawKey)
	if !ValidKey(key) {
		return nil, &acemq.DecodeError{ContentType: ct, Err: fmt.Errorf("the claim-check body carries %q, which is not a valid store key", truncate(key))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	data, err := c.store.Get(ctx, key)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, ErrNotFound):
		return nil, &acemq.DecodeError{ContentType: ct, Err: &MissingError{Key: key, Err: err}}
	default:
		return nil, &acemq.DecodeError{ContentType: ct, Retryable: true,
			Err: fmt.Errorf("the claim-check store could not be read for key %s (retried through the consumer's retry policy): %w", key, err)}
	}
}

// MissingError reports a claim-check body whose key the store holds nothing
// for. It is wrapped in a non-retryable *acemq.DecodeError.
type MissingError struct {
	Key string
	Err error // from the store, wrapping ErrNotFound
}

// Error names the key the store holds nothing for.
func (e *MissingError) Error() string {
	return fmt.Sprintf("the claim-check store has no payload for key %s (was it removed by retention?)", e.Key)
}

// Unwrap returns the store's error.
func (e *MissingError) Unwrap() error { return e.Err }

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// KeyOf returns the store key carried by a claim-check body, without
// fetching anything, for dead-letter triage. ok is false for an inline or
// unframed body, or one whose key is not valid.
func KeyOf(body []byte) (key string, ok bool) {
	if !bytes.HasPrefix(body, storedPrefix) {
		return "", false
	}
	key = string(body[len(storedPrefix):])
	if !ValidKey(key) {
		return "", false
	}
	return key, true
}

// IsFramed reports whether body begins with one of the two claim-check
// frames (inline or stored).
func IsFramed(body []byte) bool {
	return bytes.HasPrefix(body, inlinePrefix) || bytes.HasPrefix(body, storedPrefix)
}
