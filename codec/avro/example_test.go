package avro_test

import (
	"context"
	"fmt"

	"github.com/acemq/acemq/codec/avro"
)

func ExampleNewRegistered() {
	ctx := context.Background()
	reg := avro.NewRegistry(avro.NewMemoryStore())
	v1 := `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`
	v2 := `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"currency","type":"string","default":"GBP"}]}`
	producer, _ := avro.NewRegistered(ctx, reg, v1) // an old producer
	consumer, _ := avro.NewRegistered(ctx, reg, v2) // a consumer already on v2
	body, _ := producer.Encode(map[string]any{"id": "o-1"})
	id, _ := avro.SchemaIDOf(body)
	var order map[string]any
	err := consumer.Decode(body, avro.ContentTypeRegistered, &order)
	fmt.Println(id, order["id"], order["currency"], err)
	// Output: 1 o-1 GBP <nil>
}
