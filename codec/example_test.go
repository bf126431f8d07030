package codec_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	_ "github.com/acemq/acemq/codec/yaml" // registers "yaml"
)

func ExampleLookup() {
	c, err := codec.Lookup("yaml")
	if err != nil {
		panic(err)
	}
	body, _ := c.Encode(map[string]any{"id": "o-1"})
	fmt.Printf("%s %q\n", c.ContentType(), body)
	// Output: application/yaml "id: o-1\n"
}

func ExampleReading() {
	r, _ := codec.Reading("json", "yaml")
	var v map[string]any
	err := r.Decode([]byte("id: o-2\n"), "application/x-yaml", &v)
	fmt.Println(r.ContentType(), v["id"], err, r.Accepts(""))
	// Output: application/json o-2 <nil> true
}

func ExampleJSON() {
	// A consumer that reads JSON bodies of up to 16 MiB: give it
	// acemq.WithCodec(c).
	c := codec.JSON(codec.WithMaxBodySize(16 << 20))
	var v []int
	err := c.Decode([]byte(strings.Repeat("[", 200)+strings.Repeat("]", 200)), "application/json", &v)
	fmt.Println(c.ContentType(), errors.Is(err, acemq.ErrTooDeep))
	// Output: application/json true
}
