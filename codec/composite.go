package codec

import (
	"fmt"

	"github.com/acemq/acemq"
)

// Composite returns a codec that writes with the first codec and reads with
// the first codec that accepts a body's content type. A content type none
// accepts is a non-retryable *acemq.DecodeError.
func Composite(codecs ...acemq.Codec) acemq.Codec {
	if len(codecs) == 0 {
		panic("codec: Composite needs at least one codec")
	}
	return composite(codecs)
}

type composite []acemq.Codec

func (c composite) ContentType() string { return c[0].ContentType() }

func (c composite) Accepts(ct string) bool {
	for _, x := range c {
		if x.Accepts(ct) {
			return true
		}
	}
	return false
}

func (c composite) Encode(v any) ([]byte, error) { return c[0].Encode(v) }

func (c composite) Decode(body []byte, ct string, v any) error {
	for _, x := range c {
		if x.Accepts(ct) {
			return x.Decode(body, ct, v)
		}
	}
	return &acemq.DecodeError{ContentType: ct, Err: fmt.Errorf("no codec reads content type %q", ct)}
}
