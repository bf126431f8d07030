package encrypted_test

import (
	"bytes"
	"fmt"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec/encrypted"
)

// A keyring writes with its current key and reads with every key it holds;
// the key id of a body is readable without any key.
func ExampleNew() {
	ring, err := encrypted.NewKeyring("2026-01", map[string][]byte{
		"2026-01": bytes.Repeat([]byte{1}, 32), // in real life: LoadKeyringFile
		"2025-06": bytes.Repeat([]byte{2}, 32),
	})
	if err != nil {
		panic(err)
	}
	codec := encrypted.Must(acemq.JSON, ring)
	body, _ := codec.Encode(map[string]string{"id": "o-1"})
	id, _ := encrypted.KeyIDOf(body)
	var back map[string]string
	err = codec.Decode(body, codec.ContentType(), &back)
	fmt.Println(codec.ContentType(), id, back["id"], err)
	fmt.Println(ring) // never a secret
	// Output:
	// application/vnd.acemq.encrypted 2026-01 o-1 <nil>
	// encrypted.Keyring{current: 2026-01, keys: [2025-06 2026-01], secrets redacted}
}

func ExampleParseKeyring() {
	ring, err := encrypted.ParseKeyring([]byte(`{"current": "2026-01", "keys": {"2026-01": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}}`))
	fmt.Println(ring.Current(), ring.Has("2026-01"), err)
	// Output: 2026-01 true <nil>
}
