package memory

import (
	"fmt"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
)

// checkGroupSize validates x-quorum-initial-group-size as RabbitMQ does
// and otherwise ignores it: the memory broker is one node, as a
// single-node RabbitMQ is, which accepts any size and places the one
// member it has.
func checkGroupSize(args driver.Table, invalid func(arg, why string) error) error {
	v, ok := args["x-quorum-initial-group-size"]
	if !ok {
		return nil
	}
	n, isInt := wire.Integer(v)
	switch {
	case !isInt:
		return invalid("x-quorum-initial-group-size", fmt.Sprintf("{unacceptable_type,%s}", typeName(v)))
	case n == 0:
		return invalid("x-quorum-initial-group-size", "{value_zero,0}")
	case n < 0:
		return invalid("x-quorum-initial-group-size", fmt.Sprintf("{value_negative,%d}", n))
	}
	return nil
}
