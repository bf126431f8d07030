// Package xml is the XML codec (docs/wire.md §4.4), on the standard
// library's encoding/xml. It writes application/xml and reads
// application/xml, text/xml and *+xml; never a message without a content
// type, which is JSON's.
//
// Importing the package registers the codec as "xml" with package codec:
//
//	import _ "github.com/acemq/acemq/codec/xml"
//
// Structs are encoded and decoded with encoding/xml's rules and `xml:"…"`
// tags. A map[string]any (or a value holding one, such as the CLI's JSON
// input) is written as elements named after its keys, sorted, inside a root
// element (WithRoot, default "message"), a list as its item element
// repeated; decoding into *any or *map[string]any builds the same shape
// back, with every leaf a string.
//
// Refused on reading: a document type declaration (<!DOCTYPE …>) and so any
// entity declaration, internal or external — the only way XML can reach
// outside the body or expand a small body into a huge one.
//
// Also refused on reading, before anything is decoded: a body over
// DefaultMaxBodySize bytes (WithMaxBodySize) and elements nested over
// DefaultMaxDepth deep (WithMaxDepth), with an *acemq.LimitError. Reading
// costs up to about 140 bytes of allocation per body byte (a body of
// empty elements), so the size bound is what bounds a message's memory.
//
// Lists come in two shapes, and both are read into a slice field tagged
// `xml:"items"`: the item element repeated (<items>a</items><items>b</items>,
// as acemq-go-amqp writes) and wrapped in an element of the same name
// (<items><items>a</items><items>b</items></items>, as Java's Jackson writes by
// default). The rule: an element whose children are all elements of its own
// name, with no text of its own, is a wrapper and is read as its children.
// A recursive structure of that exact shape would be flattened, and an empty
// wrapper (<items/>) reads as one empty item. This codec writes the repeated
// shape.
package xml

import (
	"bytes"
	stdxml "encoding/xml"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/media"
)

// ContentType is what the codec writes.
const ContentType = "application/xml"

var (
	reads    = []string{ContentType, "text/xml"}
	suffixes = []string{"+xml"}
)

// DefaultRoot is the root element of an encoded map.
const DefaultRoot = "message"

// maxEncodeDepth bounds the nesting of a map being encoded.
const maxEncodeDepth = 1000

// The codec's bounds on reading (WithMaxBodySize and WithMaxDepth change
// them).
const (
	// DefaultMaxBodySize is the largest body the codec reads: 1 MiB.
	DefaultMaxBodySize = 1 << 20
	// DefaultMaxDepth is how deeply elements may nest: 128.
	DefaultMaxDepth = 128
)

func init() { codec.Register("xml", New()) }

// Codec is the XML codec. It implements acemq.Codec and is safe for
// concurrent use.
type Codec struct {
	root              string
	maxBody, maxDepth int
}

// New returns the XML codec.
func New(opts ...Option) *Codec {
	c := &Codec{root: DefaultRoot, maxBody: DefaultMaxBodySize, maxDepth: DefaultMaxDepth}
	for _, o := range opts {
		o.apply(c)
	}
	if c.maxBody <= 0 || c.maxDepth <= 0 {
		panic(fmt.Sprintf("xml: New needs positive bounds, not a body size of %d and a depth of %d", c.maxBody, c.maxDepth))
	}
	return c
}

// ContentType is application/xml.
func (*Codec) ContentType() string { return ContentType }

// Accepts reports whether contentType is an XML type; never for "".
func (*Codec) Accepts(contentType string) bool { return media.Matches(contentType, reads, suffixes) }

// Encode writes v as XML: encoding/xml for structs, the generic shape for
// maps (see the package documentation).
func (c *Codec) Encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	if m, ok := asMap(v); ok {
		enc := stdxml.NewEncoder(&buf)
		if err := writeElement(enc, c.root, m, 0); err != nil {
			return nil, fmt.Errorf("xml: encoding a %T: %w", v, err)
		}
		if err := enc.Flush(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	b, err := stdxml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("xml: encoding a %T: %w", v, err)
	}
	return b, nil
}

func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case *map[string]any:
		if m != nil {
			return *m, true
		}
	}
	return nil, false
}

func writeElement(enc *stdxml.Encoder, name string, v any, depth int) error {
	if depth > maxEncodeDepth {
		return errors.New("nested too deeply")
	}
	if name == "" || strings.ContainsAny(name, " <>&\"'/=") {
		return fmt.Errorf("%q cannot be an element name", name)
	}
	start := stdxml.StartElement{Name: stdxml.Name{Local: name}}
	switch x := v.(type) {
	case []any:
		for _, item := range x {
			if err := writeElement(enc, name, item, depth+1); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if err := enc.EncodeToken(start); err != nil {
			return err
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if err := writeElement(enc, k, x[k], depth+1); err != nil {
				return err
			}
		}
		return enc.EncodeToken(start.End())
	case nil:
		if err := enc.EncodeToken(start); err != nil {
			return err
		}
		return enc.EncodeToken(start.End())
	}
	return enc.EncodeElement(v, start)
}

// Decode reads body into v, refusing DTDs and reading both list shapes.
// A malformed or refused body is a non-retryable *acemq.DecodeError: the
// consumer parks it. So is a body over the codec's bounds: larger than its
// maximum size (checked first), or nesting elements deeper than its
// maximum depth (checked as the body is tokenised, before anything is
// decoded), with an *acemq.LimitError.
func (c *Codec) Decode(body []byte, contentType string, v any) error {
	if len(body) > c.maxBody {
		return &acemq.DecodeError{ContentType: contentType, Err: &acemq.LimitError{Codec: "xml", Size: len(body), Limit: c.maxBody}}
	}
	toks, err := tokens(body, c.maxDepth)
	if err == errTooDeep {
		return &acemq.DecodeError{ContentType: contentType, Err: &acemq.LimitError{Codec: "xml", Depth: true, Size: len(body), Limit: c.maxDepth}}
	}
	if err != nil {
		return &acemq.DecodeError{ContentType: contentType, Err: err}
	}
	toks = unwrapLists(toks)
	switch p := v.(type) {
	case *any:
		m, err := generic(toks)
		if err != nil {
			return &acemq.DecodeError{ContentType: contentType, Err: err}
		}
		*p = m
		return nil
	case *map[string]any:
		m, err := generic(toks)
		if err != nil {
			return &acemq.DecodeError{ContentType: contentType, Err: err}
		}
		mm, ok := m.(map[string]any)
		if !ok {
			mm = map[string]any{}
		}
		*p = mm
		return nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &acemq.DecodeError{ContentType: contentType, Err: fmt.Errorf("xml decodes into a non-nil pointer, not %T", v)}
	}
	if err := stdxml.NewTokenDecoder(&replay{toks: toks}).Decode(v); err != nil {
		return &acemq.DecodeError{ContentType: contentType, Err: fmt.Errorf("not XML for a %T: %w", v, err)}
	}
	return nil
}

// errTooDeep is what tokens returns for nesting over its bound.
var errTooDeep = errors.New("too deep")

// tokens reads every token of body, copied, refusing a DTD.
func tokens(body []byte, maxDepth int) ([]stdxml.Token, error) {
	d := stdxml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	d.Entity = nil // only the five predefined entities
	var out []stdxml.Token
	depth, roots := 0, 0
	for {
		t, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not XML: %w", err)
		}
		switch x := t.(type) {
		case stdxml.Directive:
			return nil, errors.New("the XML has a document type declaration (<!DOCTYPE …>), and DTDs and entities are refused")
		case stdxml.StartElement:
			depth++
			if depth == 1 {
				roots++
			}
			if depth > maxDepth {
				return nil, errTooDeep
			}
		case stdxml.EndElement:
			depth--
		case stdxml.CharData:
			if depth == 0 && len(bytes.TrimSpace(x)) > 0 {
				return nil, errors.New("the XML has text outside its root element")
			}
		}
		switch t.(type) {
		case stdxml.StartElement, stdxml.EndElement:
			// Token gives these names and attributes of their own; only
			// the byte slices of the others point into its buffer.
			out = append(out, t)
		default:
			out = append(out, stdxml.CopyToken(t))
		}
	}
	if roots != 1 {
		return nil, fmt.Errorf("the XML has %d root elements, not one", roots)
	}
	return out, nil
}

// unwrapLists drops every wrapper element: one whose children are all
// elements of its own name, with no text of its own (whitespace aside).
func unwrapLists(toks []stdxml.Token) []stdxml.Token {
	// end[i] is the index of the end of the element starting at i, or -1
	// for the root (never a wrapper) and for a start already dropped.
	end := make([]int32, len(toks))
	var stack []int32
	for i, t := range toks {
		switch t.(type) {
		case stdxml.StartElement:
			stack = append(stack, int32(i))
		case stdxml.EndElement:
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			end[s] = int32(i)
			if len(stack) == 0 {
				end[s] = -1
			}
		}
	}
	dropped := 0
	for i, t := range toks {
		se, ok := t.(stdxml.StartElement)
		if !ok || len(se.Attr) > 0 || end[i] < 0 {
			continue
		}
		e := int(end[i])
		children, wrapper := 0, true
		for j := i + 1; j < e && wrapper; j++ {
			switch x := toks[j].(type) {
			case stdxml.StartElement:
				if x.Name != se.Name {
					wrapper = false
					break
				}
				children++
				j = int(end[j])
			case stdxml.CharData:
				if len(bytes.TrimSpace(x)) > 0 {
					wrapper = false
				}
			}
		}
		if wrapper && children > 0 {
			toks[i], toks[e] = nil, nil // dropped below
			dropped += 2
		}
	}
	if dropped == 0 {
		return toks
	}
	out := toks[:0]
	for _, t := range toks {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}

// replay hands tokens to an xml.Decoder.
type replay struct {
	toks []stdxml.Token
	i    int
}

func (r *replay) Token() (stdxml.Token, error) {
	if r.i >= len(r.toks) {
		return nil, io.EOF
	}
	t := r.toks[r.i]
	r.i++
	return t, nil
}

// generic builds the content of the root element as maps (children by
// name, repeated names as []any, attributes as "@name") and strings.
func generic(toks []stdxml.Token) (any, error) {
	type frame struct {
		m    map[string]any
		text strings.Builder
		name string
	}
	var stack []*frame
	var root any
	for _, t := range toks {
		switch x := t.(type) {
		case stdxml.StartElement:
			f := &frame{name: x.Name.Local}
			if len(x.Attr) > 0 {
				f.m = map[string]any{}
				for _, a := range x.Attr {
					f.m["@"+a.Name.Local] = a.Value
				}
			}
			stack = append(stack, f)
		case stdxml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text.Write(x)
			}
		case stdxml.EndElement:
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			var v any
			if f.m != nil {
				if s := strings.TrimSpace(f.text.String()); s != "" {
					f.m["#text"] = s
				}
				v = f.m
			} else {
				v = f.text.String()
			}
			if len(stack) == 0 {
				root = v
				continue
			}
			p := stack[len(stack)-1]
			if p.m == nil {
				p.m = map[string]any{}
			}
			switch old := p.m[f.name].(type) {
			case nil:
				p.m[f.name] = v
			case []any:
				p.m[f.name] = append(old, v)
			default:
				p.m[f.name] = []any{old, v}
			}
		}
	}
	return root, nil
}
