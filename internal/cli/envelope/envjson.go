package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/headerjson"
	"github.com/acemq/acemq/internal/wire"
)

// This file is the broker-free heart of `acemq envelope`. The JSON form of
// an envelope and of header values is the library's (Envelope.MarshalJSON
// and UnmarshalJSON, acemq.HeadersFromJSON); what is here is the CLI's:
// the input objects decode and encode read, and the rule that encode
// stamps this host's origin on an envelope that names none.

// decodeInput is what `acemq envelope decode` reads. Other keys (a fixture
// case's "body", say) are ignored.
type decodeInput struct {
	RoutingKey *string         `json:"routingKey"`
	MessageID  *string         `json:"messageId"`
	Headers    json.RawMessage `json:"headers"`
}

// encodeInput is what `acemq envelope encode` reads.
type encodeInput struct {
	RoutingKey *string         `json:"routingKey"`
	Envelope   json.RawMessage `json:"envelope"`
}

// encodeOutput is what `acemq envelope encode` prints.
type encodeOutput struct {
	MessageID string                     `json:"messageId"`
	Headers   map[string]json.RawMessage `json:"headers"`
}

// inputError is malformed input: the message is one line for the user.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func badInput(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}

// libraryInput turns the library's complaint about its JSON input into the
// user's one-line message.
func libraryInput(err error) error {
	return badInput("%s", oneLine(err.Error()))
}

// readOneObject decodes exactly one JSON object from data into v, keeping
// numbers as json.Number.
func readOneObject(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return badInput("expected one JSON object on standard input, got nothing")
	}
	if trimmed[0] != '{' {
		return badInput("expected one JSON object on standard input, got something that does not start with '{'")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return badInput("malformed JSON: %s", oneLine(err.Error()))
	}
	if _, err := dec.Token(); err != io.EOF {
		return badInput("expected exactly one JSON object, but more follows it")
	}
	return nil
}

// Decode is `acemq envelope decode`: it reads the headers, routing
// key and message-id of a delivery as JSON and returns the envelope the
// library reads from them, in the envelope's JSON form, with a trailing
// newline.
func Decode(input []byte) ([]byte, error) {
	var in decodeInput
	if err := readOneObject(input, &in); err != nil {
		return nil, err
	}
	var rk, mid string
	if in.RoutingKey != nil {
		rk = *in.RoutingKey
	}
	if in.MessageID != nil {
		mid = *in.MessageID
	}
	headers, err := headerjson.HeadersFromJSON(in.Headers)
	if err != nil {
		return nil, libraryInput(err)
	}
	out, err := acemq.ReadEnvelope(headers, rk, mid).MarshalJSON()
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// Encode is `acemq envelope encode`: it builds an envelope from its
// JSON form and returns the message-id and the headers a publish with that
// routing key puts on the wire, as JSON with a trailing newline.
func Encode(input []byte) ([]byte, error) {
	var in encodeInput
	if err := readOneObject(input, &in); err != nil {
		return nil, err
	}
	var rk string
	if in.RoutingKey != nil {
		rk = *in.RoutingKey
	}
	raw := bytes.TrimSpace(in.Envelope)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return nil, badInput(`"envelope" must be a JSON object`)
	}
	var env acemq.Envelope
	if err := env.UnmarshalJSON(raw); err != nil {
		return nil, libraryInput(err)
	}
	// A publish stamps the connection's origin on an envelope without one;
	// an explicit "" (as decode prints an absent origin) means none, as on
	// a republish of a message that had none.
	var named struct {
		Origin *string `json:"origin"` // nil when absent or null
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return nil, badInput("malformed \"envelope\": %s", oneLine(err.Error()))
	}
	if named.Origin == nil {
		var err error
		if env, err = env.Change(func(f *acemq.Fields) { f.Origin = wire.DefaultOrigin() }); err != nil {
			return nil, libraryInput(err)
		}
	}
	headers, err := wireHeadersJSON(env, rk)
	if err != nil {
		return nil, err
	}
	return cli.MarshalLine(encodeOutput{MessageID: env.ID(), Headers: headers})
}

// wireHeadersJSON is every header a publish of env with routingKey writes,
// in the JSON form of header values: the application headers as the
// envelope's JSON form has them, and the reserved ones, which are strings
// and integers.
func wireHeadersJSON(env acemq.Envelope, routingKey string) (map[string]json.RawMessage, error) {
	out, err := cli.HeadersJSON(env)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = map[string]json.RawMessage{}
	}
	for k, v := range env.AppendHeaders(nil, routingKey) {
		if !wire.IsReserved(k) {
			continue
		}
		b, err := cli.MarshalLine(v)
		if err != nil {
			return nil, err
		}
		out[k] = bytes.TrimSuffix(b, []byte{'\n'})
	}
	return out, nil
}

// oneLine keeps the first line of a message.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
