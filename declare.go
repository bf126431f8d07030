package acemq

import (
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/declare"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// consumerDeclarations is what starting a consumer of q with policy p
// declares (docs/wire.md §5.4), in order: the halves package topology
// declares with a queue, without the queue.
func consumerDeclarations(q string, p retry.Policy) []topology.Declaration {
	var out steps
	declare.DeadLetterHalf(&out, q)
	declare.RetryHalf(&out, q, engine.PolicyOf(p).BrokerRungs())
	return out
}

// steps collects a half's declarations in order.
type steps []topology.Declaration

func (s *steps) Exchange(e driver.Exchange) {
	*s = append(*s, topology.Declaration{Kind: topology.ExchangeDeclaration, Exchange: e})
}

func (s *steps) Queue(q driver.Queue) {
	*s = append(*s, topology.Declaration{Kind: topology.QueueDeclaration, Queue: q})
}

func (s *steps) Bind(b driver.Binding) {
	*s = append(*s, topology.Declaration{Kind: topology.BindingDeclaration, Binding: b})
}
