// Package yaml is the YAML codec (docs/wire.md §4.4), on
// github.com/goccy/go-yaml, a maintained library (gopkg.in/yaml.v3 is not
// maintained any more). It writes application/yaml and reads
// application/yaml, application/x-yaml, text/yaml, text/x-yaml and *+yaml;
// never a message without a content type, which is JSON's.
//
// Importing the package registers the codec as "yaml" with package codec:
//
//	import _ "github.com/acemq/acemq/codec/yaml"
//
// Values are encoded and decoded with the library's rules: struct fields
// take `yaml:"name"` tags (and fall back to `json:"name"` tags), maps and
// slices map as expected. Decoding reads the first document of a body.
// Producers in other languages indent and quote differently: compare
// decoded values, never bytes.
//
// The library's parser costs memory with the square of a document's
// nesting depth, and its own depth check comes after the parse, so the
// codec bounds both before parsing: a body of at most DefaultMaxBodySize
// bytes (WithMaxBodySize) nesting collections at most DefaultMaxDepth deep
// (WithMaxDepth), flow ([…], {…}) and block (indentation, "- - -") levels
// counted together on the library's own tokens. A body over either is a
// non-retryable *acemq.DecodeError wrapping an *acemq.LimitError.
package yaml

import (
	"errors"
	"fmt"
	"io"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/media"
	goyaml "github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/scanner"
	"github.com/goccy/go-yaml/token"
)

// The codec's bounds (WithMaxBodySize and WithMaxDepth change them).
const (
	// DefaultMaxBodySize is the largest body the codec reads: 256 KiB.
	DefaultMaxBodySize = 256 << 10
	// DefaultMaxDepth is how deeply collections may nest: 64.
	DefaultMaxDepth = 64
)

// ContentType is what the codec writes.
const ContentType = "application/yaml"

var (
	reads    = []string{ContentType, "application/x-yaml", "text/yaml", "text/x-yaml"}
	suffixes = []string{"+yaml"}
)

func init() { codec.Register("yaml", New()) }

// Codec is the YAML codec. It implements acemq.Codec and is safe for
// concurrent use.
type Codec struct{ maxBody, maxDepth int }

// New returns the YAML codec, with the default bounds unless opts change
// them. It panics on a bound of zero or less: codecs are made at start-up,
// where a mistake should stop the program.
func New(opts ...Option) *Codec {
	c := &Codec{maxBody: DefaultMaxBodySize, maxDepth: DefaultMaxDepth}
	for _, o := range opts {
		o.apply(c)
	}
	if c.maxBody <= 0 || c.maxDepth <= 0 {
		panic(fmt.Sprintf("yaml: New needs positive bounds, not a body size of %d and a depth of %d", c.maxBody, c.maxDepth))
	}
	return c
}

// An Option configures New. Every option is a function named With…, as
// across the module.
type Option interface{ apply(*Codec) }

type option func(*Codec)

func (f option) apply(c *Codec) { f(c) }

// WithMaxBodySize sets the largest body, in bytes, the codec reads
// (default DefaultMaxBodySize). New panics on n <= 0.
func WithMaxBodySize(n int) Option {
	return option(func(c *Codec) {
		c.maxBody = n
	})
}

// WithMaxDepth sets how deeply collections may nest (default
// DefaultMaxDepth). New panics on n <= 0.
func WithMaxDepth(n int) Option {
	return option(func(c *Codec) {
		c.maxDepth = n
	})
}

// ContentType is application/yaml.
func (*Codec) ContentType() string { return ContentType }

// Accepts reports whether contentType is a YAML type; never for "".
func (*Codec) Accepts(contentType string) bool { return media.Matches(contentType, reads, suffixes) }

// Encode writes v as YAML.
func (*Codec) Encode(v any) ([]byte, error) {
	b, err := goyaml.MarshalWithOptions(v, goyaml.UseJSONMarshaler())
	if err != nil {
		return nil, fmt.Errorf("yaml: encoding a %T: %w", v, err)
	}
	return b, nil
}

// Decode reads body into v. A malformed body, or one over the codec's
// bounds, is a non-retryable *acemq.DecodeError: the consumer parks it.
// That includes a body on which the YAML library panics (some malformed
// documents make go-yaml dereference nil): the panic is recovered here, so
// a hostile body cannot take down whatever decodes it.
func (c *Codec) Decode(body []byte, contentType string, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &acemq.DecodeError{ContentType: contentType, Err: fmt.Errorf("not YAML for a %T: the YAML decoder failed on this body (%v)", v, r)}
		}
	}()
	if len(body) > c.maxBody {
		return &acemq.DecodeError{ContentType: contentType, Err: &acemq.LimitError{Codec: "yaml", Size: len(body), Limit: c.maxBody}}
	}
	if tooDeep(body, c.maxDepth) {
		return &acemq.DecodeError{ContentType: contentType, Err: &acemq.LimitError{Codec: "yaml", Depth: true, Size: len(body), Limit: c.maxDepth}}
	}
	if err := goyaml.UnmarshalWithOptions(body, v, goyaml.UseJSONUnmarshaler()); err != nil {
		return &acemq.DecodeError{ContentType: contentType, Err: fmt.Errorf("not YAML for a %T: %s", v, message(err))}
	}
	return nil
}

// message is the library's error without the document it quotes: the
// position and the message, which is the first line of its Error. Error
// itself prints the source around the fault, at a cost of several
// kilobytes per body byte on some bodies.
func message(err error) string {
	var ye goyaml.Error
	if errors.As(err, &ye) {
		return ye.FormatError(false, false)
	}
	return firstLine(err.Error())
}

// firstLine keeps an error to its first line: the library's messages
// quote the document with a caret under the fault.
func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// tooDeep reports whether body nests collections more than max deep. It
// reads the tokens of the library's own lexer, whose cost is linear in the
// body (the parser's is not), so that it sees exactly the strings,
// comments and block scalars the parser will. Flow collections count one
// level per open bracket; block collections one per indentation column a
// sequence entry ("-") or a mapping key opens, a sequence written at its
// parent key's column ("a:\n- x") counting as a level of its own.
func tooDeep(body []byte, max int) bool {
	if len(body) == 0 {
		return false
	}
	type level struct {
		col int
		seq bool
	}
	var (
		flow  int
		block []level
	)
	// enter records a block entry at column col: it closes the levels
	// indented further and opens one unless it continues the current one.
	enter := func(col int, seq bool) {
		for len(block) > 0 {
			top := block[len(block)-1]
			if top.col > col || top.col == col && top.seq && !seq {
				block = block[:len(block)-1]
				continue
			}
			break
		}
		if n := len(block); n == 0 || block[n-1].col < col || block[n-1].seq != seq {
			block = append(block, level{col, seq})
		}
	}
	var sc scanner.Scanner
	sc.Init(string(body))
	var prev *token.Token
	for {
		toks, err := sc.Scan()
		for _, tk := range toks {
			switch tk.Type {
			case token.SequenceStartType, token.MappingStartType:
				flow++
			case token.SequenceEndType, token.MappingEndType:
				if flow > 0 {
					flow--
				}
			case token.DocumentHeaderType, token.DocumentEndType:
				flow, block = 0, block[:0]
			case token.SequenceEntryType, token.MappingKeyType:
				if flow == 0 && tk.Position != nil {
					enter(tk.Position.Column, tk.Type == token.SequenceEntryType)
				}
			case token.MappingValueType:
				if flow == 0 && prev != nil && prev.Position != nil {
					enter(prev.Position.Column, false)
				}
			}
			if flow+len(block) > max {
				return true
			}
			prev = tk
		}
		if err == io.EOF {
			return false
		}
		// Any other error is a token the lexer cannot read: it goes on
		// after it, as lexer.Tokenize (what the parser reads) does.
	}
}
