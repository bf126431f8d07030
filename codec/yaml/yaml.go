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
package yaml

import (
	"fmt"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/media"
	goyaml "github.com/goccy/go-yaml"
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
type Codec struct{}

// New returns the YAML codec.
func New() *Codec { return &Codec{} }

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

// Decode reads body into v. A malformed body is a non-retryable
// *acemq.DecodeError: the consumer parks it. That includes a body on which
// the YAML library panics (some malformed documents make go-yaml
// dereference nil): the panic is recovered here, so a hostile body cannot
// take down whatever decodes it.
func (*Codec) Decode(body []byte, contentType string, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &acemq.DecodeError{ContentType: contentType, Err: fmt.Errorf("not YAML for a %T: the YAML decoder failed on this body (%v)", v, r)}
		}
	}()
	if err := goyaml.UnmarshalWithOptions(body, v, goyaml.UseJSONUnmarshaler()); err != nil {
		return &acemq.DecodeError{ContentType: contentType, Err: fmt.Errorf("not YAML for a %T: %s", v, firstLine(err.Error()))}
	}
	return nil
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
