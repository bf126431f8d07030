package acemq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/acemq/acemq/driver"
)

// TypeHandler is a handler registered for one envelope type: HandleType
// makes one, and ConsumeTypes takes several, one consumer for a queue that
// carries several message types.
type TypeHandler struct {
	typ    string
	handle func(codec Codec, queue string) handleFunc
}

// handleFunc is what the engine calls with a delivery: the payload
// decoded and handed to a handler, or the decoder's error.
type handleFunc = func(ctx context.Context, d driver.Delivery, env Envelope) (Ack, error)

// HandleType registers h for the messages whose envelope type
// (Envelope.Type: the acemq-type header, else the routing key the message
// was published with) is typ, exactly as written. Each is decoded into a T
// by the consumer's codec, as Consume decodes, before h sees it.
func HandleType[T any](typ string, h Handler[T]) TypeHandler {
	th := TypeHandler{typ: typ}
	if h != nil {
		th.handle = func(codec Codec, queue string) handleFunc { return typed(codec, queue, h) }
	}
	return th
}

// typed is the engine's handle for h: decode with codec, then call h.
func typed[T any](codec Codec, queue string, h Handler[T]) handleFunc {
	return func(ctx context.Context, d driver.Delivery, env Envelope) (Ack, error) {
		var v T
		if err := decode(codec, d.Body, d.ContentType, &v); err != nil {
			return Ack{}, err
		}
		return h(ctx, newMessage(v, &d, env, queue)), nil
	}
}

// ConsumeTypes starts one consumer of queue for several message types:
// every delivery goes to the handler registered for its envelope type
// (HandleType), decoded into that handler's type by the consumer's codec.
// Everything else is Consume's, on the same engine: the options, what
// starting declares, the decisions and their settlement, retries, the
// circuit breaker, metrics, spans and Close. Nothing is decoded before the
// type is known, so a body one handler's type cannot read is parked (or
// retried, when the codec says retrying could help) exactly as Consume
// parks it, and the other types are not affected.
//
// A message whose type has no handler goes to the handler given with
// WithUnknownType. Without one it is dead-lettered to {queue}.dlq as
// unprocessable, with a reason naming its type and the registered ones.
//
// WithMiddleware is refused, since the handlers take different types:
// wrap each handler before registering it (HandleType(typ, mw(h))).
// HandleType with an empty type or a nil handler, and a type registered
// twice, are refused.
func ConsumeTypes(ctx context.Context, c *Conn, queue string, handlers []TypeHandler, opts ...ConsumeOption) (*Consumer, error) {
	table, err := typeTable(handlers)
	if err != nil {
		return nil, err
	}
	k, err := newConsumer("ConsumeTypes", c, queue, opts, consumeDefaults())
	if err != nil {
		return nil, err
	}
	if len(k.cfg.middleware) > 0 {
		return nil, errors.New("acemq: ConsumeTypes takes no WithMiddleware, since its handlers take different types: wrap each handler given to HandleType instead")
	}
	codec := k.cfg.codec
	handles := make(map[string]handleFunc, len(table))
	for typ, th := range table {
		handles[typ] = th.handle(codec, queue)
	}
	unknown := k.cfg.unknown
	if unknown == nil {
		unknown = deadLetterUnknown(registered(table))
	}
	k.handle = func(ctx context.Context, d driver.Delivery, env Envelope) (Ack, error) {
		if h, ok := handles[env.Type()]; ok {
			return h(ctx, d, env)
		}
		return unknown(ctx, newMessage(d.Body, &d, env, queue)), nil
	}
	return k.started(ctx)
}

// typeTable checks the handlers given to ConsumeTypes and indexes them by
// type.
func typeTable(handlers []TypeHandler) (map[string]TypeHandler, error) {
	if len(handlers) == 0 {
		return nil, errors.New("acemq: ConsumeTypes needs at least one handler made by HandleType")
	}
	table := make(map[string]TypeHandler, len(handlers))
	for i, th := range handlers {
		switch {
		case th.typ == "":
			return nil, fmt.Errorf("acemq: ConsumeTypes: handler %d was registered for an empty type", i+1)
		case th.handle == nil:
			return nil, fmt.Errorf("acemq: ConsumeTypes: the handler of type %q is nil", th.typ)
		}
		if _, dup := table[th.typ]; dup {
			return nil, fmt.Errorf("acemq: ConsumeTypes: type %q is registered twice", th.typ)
		}
		table[th.typ] = th
	}
	return table, nil
}

// registered lists the table's types, sorted.
func registered(table map[string]TypeHandler) []string {
	types := make([]string, 0, len(table))
	for t := range table {
		types = append(types, t)
	}
	slices.Sort(types)
	return types
}

// deadLetterUnknown is ConsumeTypes' default for a type without a handler:
// a fatal reject, so the message is dead-lettered at once whatever the
// retry policy, with a reason naming its type and the registered ones.
func deadLetterUnknown(types []string) Handler[[]byte] {
	quoted := make([]string, len(types))
	for i, t := range types {
		quoted[i] = strconv.Quote(t)
	}
	list := strings.Join(quoted, ", ")
	return func(_ context.Context, m Message[[]byte]) Ack {
		return Reject(Fatal(fmt.Errorf("acemq: no handler is registered for type %q (registered: %s)", m.Envelope.Type(), list)))
	}
}

// WithUnknownType gives ConsumeTypes the decision for a message whose
// envelope type has no handler: h gets it undecoded (Payload is the body
// as delivered) and its Ack is settled as any other, so it may accept
// (drop) it, park it, reject it or retry it. The default dead-letters it
// (see ConsumeTypes). Consume and ConsumeBatch refuse it, as they have no
// types to match; WithUnknownType(nil) is refused.
func WithUnknownType(h Handler[[]byte]) ConsumeOption {
	return consumeOption(func(c *consumeConfig) {
		c.unknownSet = true
		c.unknown = h
	})
}

// only refuses the options that belong to ConsumeTypes for the Consume
// variant named fn.
func (k *consumerCore) only(fn string) error {
	if k.cfg.unknownSet {
		return fmt.Errorf("acemq: WithUnknownType is for ConsumeTypes, not %s: a %s consumer has no types to match", fn, fn)
	}
	return nil
}
