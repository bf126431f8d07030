package xml_test

import (
	"fmt"

	"github.com/acemq/acemq/codec/xml"
)

// Both list shapes read into the same field: the item repeated, and
// wrapped in an element of its name (Jackson's default).
func ExampleCodec_Decode() {
	type Order struct {
		ID    string   `xml:"id"`
		Items []string `xml:"items"`
	}
	c := xml.New()
	for _, body := range []string{
		`<order><id>o-1</id><items>a</items><items>b</items></order>`,
		`<Order><id>o-1</id><items><items>a</items><items>b</items></items></Order>`,
	} {
		var o Order
		err := c.Decode([]byte(body), "application/xml", &o)
		fmt.Println(o.ID, o.Items, err)
	}
	err := c.Decode([]byte(`<!DOCTYPE o [<!ENTITY x SYSTEM "file:///etc/passwd">]><o>&x;</o>`), "text/xml", new(Order))
	fmt.Println(err)
	// Output:
	// o-1 [a b] <nil>
	// o-1 [a b] <nil>
	// could not decode a body (text/xml): the XML has a document type declaration (<!DOCTYPE …>), and DTDs and entities are refused
}
