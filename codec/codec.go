// Package codec names the module's codecs, so that configuration and the
// acemq CLI can choose a payload format by name (docs/wire.md §4.4):
//
//	c, err := codec.Lookup("yaml")    // after importing codec/yaml
//	r, err := codec.Reading("json", "yaml", "xml") // reads by content type
//
// JSON makes the JSON codec with other bounds than acemq.JSON's, its
// options being WithMaxBodySize and WithMaxDepth:
//
//	c := codec.JSON(codec.WithMaxBodySize(16 << 20)) // reads bodies up to 16 MiB
//
// json, text (alias string) and bytes are always registered. A format
// package registers its name when it is imported, as database/sql drivers
// do: xml, yaml and toml by a blank import of github.com/acemq/acemq/codec/xml,
// …/codec/yaml or …/codec/toml. Protobuf and Avro codecs need a message type
// or a schema, so none is registered for you: build one with
// codec/protobuf or codec/avro and Register it under a name of your own.
//
// The format packages live under codec/ so that a program that needs only
// JSON over RabbitMQ compiles none of their dependencies; docs/codecs.md in
// the repository measures what each costs.
package codec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/acemq/acemq"
)

var (
	mu     sync.RWMutex
	byName = map[string]acemq.Codec{}
)

// where says how to get a codec the registry does not hold yet.
var where = map[string]string{
	"xml":       `import _ "github.com/acemq/acemq/codec/xml"`,
	"yaml":      `import _ "github.com/acemq/acemq/codec/yaml"`,
	"toml":      `import _ "github.com/acemq/acemq/codec/toml"`,
	"protobuf":  `build one for your message type with protobuf.New and codec.Register it`,
	"avro":      `build one for your schema with avro.NewFixed or avro.NewRegistered and codec.Register it`,
	"encrypted": `wrap a codec with encrypted.New(inner, keyring); it needs a keyring, so it has no name`,
}

func init() {
	Register("json", acemq.JSON)
	Register("text", acemq.Text)
	Register("string", acemq.Text)
	Register("bytes", acemq.Bytes)
}

// Register makes c available under name (case-insensitive; letters,
// digits, '.', '_' and '-'). It panics when c is nil, the name is not valid
// or already taken: registration happens at start-up, where a mistake
// should stop the program.
func Register(name string, c acemq.Codec) {
	if c == nil {
		panic("codec: Register of a nil codec under " + name)
	}
	key, err := normalise(name)
	if err != nil {
		panic("codec: " + err.Error())
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := byName[key]; dup {
		panic("codec: Register called twice for " + key)
	}
	byName[key] = c
}

func normalise(name string) (string, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	if key == "" {
		return "", errors.New("a codec name must not be empty")
	}
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return "", fmt.Errorf("the codec name %q has %q; use letters, digits, '.', '_' and '-'", name, r)
		}
	}
	return key, nil
}

// Lookup returns the codec registered under name (case-insensitive). The
// error of an unknown name lists the registered ones and, for a format
// the module has but the program did not import, says how to get it.
func Lookup(name string) (acemq.Codec, error) {
	key, err := normalise(name)
	if err != nil {
		return nil, fmt.Errorf("codec: %w", err)
	}
	mu.RLock()
	c, ok := byName[key]
	mu.RUnlock()
	if ok {
		return c, nil
	}
	msg := fmt.Sprintf("codec: no codec is registered as %q (registered: %s)", key, strings.Join(Names(), ", "))
	if hint, ok := where[key]; ok {
		msg += "; to get it, " + hint
	}
	return nil, errors.New(msg)
}

// Names returns the registered names, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Reading returns a codec that writes with the first named codec and reads
// each body with the first named codec that accepts its content type
// (acemq.Composite over the named codecs). Name bytes last, if at all: it
// accepts every content type.
func Reading(names ...string) (acemq.Codec, error) {
	if len(names) == 0 {
		return nil, errors.New("codec: Reading needs at least one codec name")
	}
	cs := make([]acemq.Codec, len(names))
	for i, n := range names {
		c, err := Lookup(n)
		if err != nil {
			return nil, err
		}
		cs[i] = c
	}
	if len(cs) == 1 {
		return cs[0], nil
	}
	return Composite(cs...), nil
}
