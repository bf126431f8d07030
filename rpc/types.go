package rpc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/engine"
)

// TypeHandler is a responder's handler for one request type: HandleType
// makes one, and ServeTypes takes several, one responder for a queue that
// carries several kinds of request.
type TypeHandler struct {
	typ  string
	bind func(b *base) acemq.TypeHandler
}

// HandleType registers h for the requests whose envelope type
// (acemq.Envelope.Type) is typ, exactly as written: each is decoded into a
// Req by the responder's codec and answered with a Rep, as Serve answers.
// A caller names the type with WithEnvelope (an envelope whose Type is
// typ), or by publishing with the routing key typ, which the type defaults
// to.
func HandleType[Req, Rep any](typ string, h Handler[Req, Rep]) TypeHandler {
	return TypeHandler{typ: typ, bind: func(b *base) acemq.TypeHandler {
		if h == nil {
			return acemq.HandleType[Req](typ, nil) // refused by ConsumeTypes
		}
		s := &server[Req, Rep]{base: b, h: h}
		return acemq.HandleType(typ, s.handle)
	}}
}

// ServeTypes starts one responder on queue for several request types:
// each request goes to the handler registered for its envelope type
// (HandleType) and is handled, answered and settled exactly as Serve
// handles a request, on one acemq.ConsumeTypes consumer, so opts mean what
// they mean there and the counters count every type's requests.
//
// A request whose type has no handler is answered with a failure reply
// ("Error: rpc: no handler is registered for request type …", naming the
// registered ones), so its caller learns at once rather than at its
// timeout, and dead-lettered to {queue}.dlq as unprocessable. Given
// acemq.WithUnknownType, that handler decides instead, and no reply is
// sent unless it sends one.
func ServeTypes(ctx context.Context, conn *acemq.Conn, queue string, handlers []TypeHandler, opts ...acemq.ConsumeOption) (*Responder, error) {
	if conn == nil {
		return nil, errors.New("rpc: ServeTypes needs a connection")
	}
	codec := engine.Carried(opts, acemq.JSON)
	if codec == nil {
		return nil, errors.New("rpc: ServeTypes was given acemq.WithCodec(nil): pass the codec requests are written in")
	}
	r := &Responder{queue: queue, bound: newReplyBound()}
	b := newBase(conn, codec, r)
	ths := make([]acemq.TypeHandler, len(handlers))
	types := make([]string, 0, len(handlers))
	for i, th := range handlers {
		if th.bind == nil {
			continue // the zero TypeHandler: refused by ConsumeTypes
		}
		ths[i] = th.bind(b)
		types = append(types, strconv.Quote(th.typ))
	}
	slices.Sort(types)
	u := &unknownType{base: b, registered: strings.Join(types, ", ")}
	// First, so that an acemq.WithUnknownType among opts replaces it.
	opts = append([]acemq.ConsumeOption{acemq.WithUnknownType(u.handle)}, opts...)
	c, err := acemq.ConsumeTypes(ctx, conn, queue, ths, opts...)
	if err != nil {
		r.bound.close()
		return nil, fmt.Errorf("rpc: starting the responder on %q: %w", queue, err)
	}
	r.consumer = c
	return r, nil
}

// unknownType answers the requests of a type without a handler.
type unknownType struct {
	*base
	registered string
}

func (u *unknownType) handle(ctx context.Context, m acemq.Message[[]byte]) acemq.Ack {
	err := fmt.Errorf("rpc: no handler is registered for request type %q (registered: %s)", m.Envelope.Type(), u.registered)
	if to := ReplyAddress(m); to != "" {
		body, _ := u.codec.Encode(nil) // never decoded; empty when the codec cannot write it
		if perr := u.reply(ctx, &m.Envelope, m.CorrelationID, to, body, describe(err), false); perr != nil {
			return acemq.Retry(fmt.Errorf("%w, and the failure reply could not be published: %w", err, perr))
		}
	}
	return acemq.Reject(acemq.Fatal(err))
}
