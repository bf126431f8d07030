package cli

// The formats publish --codec can name, registered with package codec.
import (
	_ "github.com/acemq/acemq/codec/toml"
	_ "github.com/acemq/acemq/codec/xml"
	_ "github.com/acemq/acemq/codec/yaml"
)
