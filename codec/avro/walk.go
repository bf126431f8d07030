package avro

import (
	"errors"
	"fmt"

	"github.com/acemq/acemq"
	hamba "github.com/hamba/avro/v2"
)

// walker reads one Avro value's encoding without building anything, to
// check a body before hamba/avro decodes it: that it holds the whole value
// (hamba reads a truncated body as zeros), nothing after it (hamba ignores
// trailing bytes), and values nested at most max deep (hamba recurses once
// per level of a recursive schema, at about 1.5 KB a level). It allocates
// nothing and reads each byte once.
type walker struct {
	b   []byte
	i   int
	max int
}

var errTruncated = errors.New("the body ends in the middle of the value (truncated)")

// check walks body as one value of schema s, the writer's.
func check(s hamba.Schema, body []byte, maxDepth int) error {
	w := walker{b: body, max: maxDepth}
	if err := w.value(s, 0); err != nil {
		return err
	}
	if n := len(body) - w.i; n > 0 {
		return fmt.Errorf("%d bytes follow the value, which ends at byte %d: the body is not one value in the schema", n, w.i)
	}
	return nil
}

func (w *walker) skip(n int64) error {
	if n < 0 || n > int64(len(w.b)-w.i) {
		return errTruncated
	}
	w.i += int(n)
	return nil
}

// long reads a zig-zag varint of at most ten bytes.
func (w *walker) long() (int64, error) {
	var u uint64
	for shift := uint(0); shift < 70; shift += 7 {
		if w.i >= len(w.b) {
			return 0, errTruncated
		}
		c := w.b[w.i]
		w.i++
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
	return 0, errors.New("a variable-length integer runs over ten bytes")
}

func (w *walker) value(s hamba.Schema, depth int) error {
	switch s := s.(type) {
	case *hamba.RefSchema:
		return w.value(s.Schema(), depth)
	case *hamba.NullSchema:
		return nil
	case *hamba.PrimitiveSchema:
		switch s.Type() {
		case hamba.Null:
			return nil
		case hamba.Boolean:
			return w.skip(1)
		case hamba.Int, hamba.Long:
			_, err := w.long()
			return err
		case hamba.Float:
			return w.skip(4)
		case hamba.Double:
			return w.skip(8)
		case hamba.Bytes, hamba.String:
			n, err := w.long()
			if err != nil {
				return err
			}
			return w.skip(n)
		}
	case *hamba.FixedSchema:
		return w.skip(int64(s.Size()))
	case *hamba.EnumSchema:
		_, err := w.long()
		return err
	case *hamba.UnionSchema:
		n, err := w.long()
		if err != nil {
			return err
		}
		types := s.Types()
		if n < 0 || n >= int64(len(types)) {
			return fmt.Errorf("union index %d is not one of the schema's %d branches", n, len(types))
		}
		return w.value(types[n], depth)
	case *hamba.RecordSchema:
		if depth++; depth > w.max {
			return errTooDeep
		}
		for _, f := range s.Fields() {
			if err := w.value(f.Type(), depth); err != nil {
				return err
			}
		}
		return nil
	case *hamba.ArraySchema:
		return w.blocks(s.Items(), false, depth)
	case *hamba.MapSchema:
		return w.blocks(s.Values(), true, depth)
	}
	return fmt.Errorf("the schema has a %s, which the body check does not know", s.Type())
}

// errTooDeep is replaced by the *acemq.LimitError that names the bound.
var errTooDeep = errors.New("too deep")

// blocks walks an array's or map's blocks of items. A block may not claim
// more items than bytes are left, as hamba refuses it too: each item
// takes at least one byte, except items of nothing (null), and a long
// run of those is an attack on the decoder's time.
func (w *walker) blocks(items hamba.Schema, keyed bool, depth int) error {
	if depth++; depth > w.max {
		return errTooDeep
	}
	for {
		n, err := w.long()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n < 0 { // a negative count is followed by the block's size in bytes
			n = -n
			if _, err := w.long(); err != nil {
				return err
			}
		}
		if n < 0 || n > int64(len(w.b)-w.i) {
			return fmt.Errorf("a block claims %d items, more than the %d bytes left", n, len(w.b)-w.i)
		}
		for range n {
			if keyed {
				k, err := w.long()
				if err != nil {
					return err
				}
				if err := w.skip(k); err != nil {
					return err
				}
			}
			if err := w.value(items, depth); err != nil {
				return err
			}
		}
	}
}

// checkBody walks data (the body without its frame) as a value of the
// writer's schema s, returning the *acemq.DecodeError to refuse it with.
func (c *Codec) checkBody(s hamba.Schema, data []byte, ct string) error {
	err := check(s, data, c.maxDepth)
	if err == errTooDeep {
		return &acemq.DecodeError{ContentType: ct, Err: &acemq.LimitError{Codec: "avro", Depth: true, Size: len(data), Limit: c.maxDepth}}
	}
	if err != nil {
		return &acemq.DecodeError{ContentType: ct, Err: fmt.Errorf("not Avro in the expected schema: %w", err)}
	}
	return nil
}
