package topology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/declare"
	"github.com/acemq/acemq/internal/wire"
)

// declaration is a Declaration with what Topology.Apply needs to know of
// it.
type declaration struct {
	Declaration

	// defaultDeadLetter: the queue's dead-letter arguments are the quorum
	// default, not asked for (Topology.Apply tolerates their absence).
	defaultDeadLetter bool
}

// key identifies what a declaration names: two declarations with the same
// key declare the same broker object and must agree.
func (d declaration) key() string {
	switch d.Kind {
	case BindingDeclaration:
		return fmt.Sprintf("binding\x00%s\x00%s\x00%s\x00%s", d.Binding.Exchange, d.Binding.Queue, d.Binding.RoutingKey, canonicalArgs(d.Binding.Args))
	default:
		return string(d.Kind) + "\x00" + d.Name()
	}
}

// same reports whether two declarations of the same object ask for the same
// settings. Integer arguments compare equal across widths, as the broker
// compares them.
func (d declaration) same(o declaration) bool {
	if d.Kind != o.Kind {
		return false
	}
	switch d.Kind {
	case ExchangeDeclaration:
		a, b := d.Exchange, o.Exchange
		return a.Name == b.Name && a.Kind == b.Kind && a.Durable == b.Durable && a.AutoDelete == b.AutoDelete &&
			a.Internal == b.Internal && equalArgs(a.Args, b.Args)
	case QueueDeclaration:
		a, b := d.Queue, o.Queue
		return a.Name == b.Name && a.Durable == b.Durable && a.Exclusive == b.Exclusive && a.AutoDelete == b.AutoDelete &&
			equalArgs(a.Args, b.Args)
	case BindingDeclaration:
		return d.key() == o.key()
	}
	return false
}

func canonicalArgs(t driver.Table) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(t)) {
		v := t[k]
		if n, ok := wire.Integer(v); ok {
			v = n
		}
		fmt.Fprintf(&b, "%s=%T:%v;", k, v, v)
	}
	return b.String()
}

func equalArgs(a, b driver.Table) bool { return canonicalArgs(a) == canonicalArgs(b) }

// resolveQueue applies the queue-type rules of docs/wire.md §5.3 to q: the
// one place where a queue's type is decided. typ is the type asked for
// with WithQueueType ("" for none).
func resolveQueue(q driver.Queue, typ QueueType) (driver.Queue, error) {
	args := maps.Clone(q.Args)
	if args == nil {
		args = driver.Table{}
	}
	name := q.Name
	forcedClassic := q.Exclusive || q.AutoDelete || !q.Durable
	why := func() string {
		var w []string
		if q.Exclusive {
			w = append(w, "exclusive")
		}
		if q.AutoDelete {
			w = append(w, "auto-delete")
		}
		if !q.Durable {
			w = append(w, "transient")
		}
		return strings.Join(w, ", ")
	}

	if v, ok := args[argQueueType]; ok {
		s, isString := v.(string)
		if !isString || s == "" {
			return q, fmt.Errorf("the queue %q has an x-queue-type argument that is not a queue type name: %v", name, v)
		}
		if typ != "" && typ != QueueType(s) {
			return q, fmt.Errorf("the queue %q asks for a %s queue with WithQueueType and a %s queue in its arguments", name, typ, s)
		}
		typ = QueueType(s)
	}
	delete(args, argQueueType)
	switch {
	case typ == QueueClassic:
		// Classic is the argument's absence.
	case typ == "" && forcedClassic:
		// Exclusive, auto-delete and transient queues are classic.
	case typ == "":
		args[argQueueType] = string(QueueQuorum)
	case forcedClassic:
		return q, fmt.Errorf("the queue %q cannot be a %s queue and %s: the broker refuses that; leave the type out (it is then classic) or drop the flag", name, typ, why())
	default:
		args[argQueueType] = string(typ)
	}

	q.Args = args
	return q, nil
}

// deadLetterDefault reports whether q, whose type resolveQueue has decided,
// gets the dead-letter half, and whether that is the quorum default rather
// than WithDeadLettering(true): a quorum queue has it unless
// WithDeadLettering(false) is given or its arguments name a dead-letter
// exchange of their own.
func deadLetterDefault(q driver.Queue, s declare.Spec) (on, defaulted bool) {
	if s.DeadLetterSet {
		return s.DeadLetter, false
	}
	if queueType(q.Args) != string(QueueQuorum) {
		return false, false
	}
	for _, a := range []string{declare.ArgDeadLetterExchange, declare.ArgDeadLetterRoutingKey} {
		if _, ok := q.Args[a]; ok {
			return false, false
		}
	}
	return true, true
}

// withDeadLetterArgs adds the dead-letter arguments to q, refusing a queue
// that sets either itself.
func withDeadLetterArgs(q driver.Queue) (driver.Queue, error) {
	for _, a := range []string{declare.ArgDeadLetterExchange, declare.ArgDeadLetterRoutingKey} {
		if _, ok := q.Args[a]; ok {
			return q, fmt.Errorf("the queue %q already sets %s; WithDeadLettering would overrule it: drop the argument or the option", q.Name, a)
		}
	}
	q.Args[declare.ArgDeadLetterExchange] = wire.DeadLetterExchange
	q.Args[declare.ArgDeadLetterRoutingKey] = wire.DeadLetterQueue(q.Name)
	return q, nil
}

// deadLetterMismatch reports whether err is the broker refusing a
// declaration because the queue exists without (or with other)
// dead-letter arguments.
func deadLetterMismatch(err error) bool {
	var pe *driver.PreconditionError
	if !errors.As(err, &pe) || pe.Kind != "queue" {
		return false
	}
	return strings.Contains(pe.Detail, "'"+declare.ArgDeadLetterExchange+"'") || strings.Contains(pe.Detail, "'"+declare.ArgDeadLetterRoutingKey+"'")
}

// declareWithoutDeadLetter declares d's queue without the default
// dead-letter arguments, for a queue that exists without them, and warns
// that it has nowhere to dead-letter to.
func declareWithoutDeadLetter(ctx context.Context, c driver.Conn, log *slog.Logger, d declaration) error {
	q := d.Queue
	q.Args = maps.Clone(q.Args)
	delete(q.Args, declare.ArgDeadLetterExchange)
	delete(q.Args, declare.ArgDeadLetterRoutingKey)
	if _, err := c.DeclareQueue(ctx, q); err != nil {
		return err
	}
	log.Warn("acemq: the quorum queue exists without a dead-letter exchange: a message over its delivery limit (20 on RabbitMQ 4) is dropped, not moved to its .dlq; see docs/upgrading.md",
		slog.String("queue", q.Name), slog.String("dead_letter_queue", wire.DeadLetterQueue(q.Name)))
	return nil
}

// Stream and single-active-consumer arguments (docs/wire.md §5.9, §5.10).
const (
	argMaxAge            = "x-max-age"
	argMaxLengthBytes    = "x-max-length-bytes"
	argMaxSegmentBytes   = "x-stream-max-segment-size-bytes"
	argSingleActive      = "x-single-active-consumer"
	streamRefusedOptions = "WithDeadLettering and WithRetry do not apply to a stream: nothing is dead-lettered or retried on one (docs/streams.md); drop the option"
)

// queueLimits adds the retention and single-active-consumer arguments of s
// to q, whose type resolveQueue has decided: retention belongs to streams,
// single active consumer to the other types.
func queueLimits(q driver.Queue, s declare.Spec) (driver.Queue, error) {
	stream := queueType(q.Args) == string(QueueStream)
	if stream && (s.DeadLetter || s.Retry != nil) {
		return q, fmt.Errorf("the stream %q: %s", q.Name, streamRefusedOptions)
	}
	set := func(opt, arg string, given bool, v any) error {
		if !given {
			return nil
		}
		if !stream {
			return fmt.Errorf("the queue %q: %s applies to streams only; add WithQueueType(QueueStream) or drop the option", q.Name, opt)
		}
		if _, ok := q.Args[arg]; ok {
			return fmt.Errorf("the stream %q sets %s in its arguments and with %s: drop one", q.Name, arg, opt)
		}
		q.Args[arg] = v
		return nil
	}
	if s.MaxAge != 0 {
		age, err := formatMaxAge(s.MaxAge)
		if err != nil {
			return q, fmt.Errorf("the stream %q: %w", q.Name, err)
		}
		if err := set("WithMaxAge", argMaxAge, true, age); err != nil {
			return q, err
		}
	}
	for _, n := range []struct {
		opt, arg string
		v        int64
	}{{"WithMaxLengthBytes", argMaxLengthBytes, s.MaxBytes}, {"WithMaxSegmentSizeBytes", argMaxSegmentBytes, s.SegmentBytes}} {
		if n.v < 0 {
			return q, fmt.Errorf("the queue %q: %s(%d): the size must be positive", q.Name, n.opt, n.v)
		}
		if err := set(n.opt, n.arg, n.v != 0, n.v); err != nil {
			return q, err
		}
	}
	if s.SingleActive {
		if stream {
			return q, fmt.Errorf("the stream %q: WithSingleActiveConsumer does not apply to streams over AMQP 0-9-1; every stream reader reads every message", q.Name)
		}
		q.Args[argSingleActive] = true
	}
	return q, nil
}

// formatMaxAge renders d as a stream's x-max-age by the family's rule
// (docs/wire.md §5.9): the largest unit among D, h, m and s that states d
// exactly, so 7 days is "7D", 36 hours "36h", 90 minutes "90m", 45 seconds
// "45s". d must be a positive whole number of seconds.
func formatMaxAge(d time.Duration) (string, error) {
	if d <= 0 || d%time.Second != 0 {
		return "", fmt.Errorf("WithMaxAge(%s): a stream's maximum age must be a positive whole number of seconds", d)
	}
	for _, u := range []struct {
		d    time.Duration
		unit string
	}{{24 * time.Hour, "D"}, {time.Hour, "h"}, {time.Minute, "m"}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.unit, nil
		}
	}
	return strconv.FormatInt(int64(d/time.Second), 10) + "s", nil
}

// argMaxPriority is the queue argument of a priority queue.
const argMaxPriority = "x-max-priority"

// withMaxPriority returns the queue's arguments with WithMaxPriority's
// x-max-priority added, refusing a maximum of 0 and a second maximum given
// in WithArguments.
func withMaxPriority(name string, s declare.Spec) (driver.Table, error) {
	if !s.MaxPrioSet {
		return s.Args, nil
	}
	if s.MaxPriority == 0 {
		return nil, fmt.Errorf("the queue %q: WithMaxPriority(0) makes no priority queue; give a maximum from 1 to 255 (RabbitMQ advises at most 10) or drop the option", name)
	}
	if _, ok := s.Args[argMaxPriority]; ok {
		return nil, fmt.Errorf("the queue %q sets %s in WithArguments and with WithMaxPriority: drop one", name, argMaxPriority)
	}
	args := maps.Clone(s.Args)
	if args == nil {
		args = driver.Table{}
	}
	args[argMaxPriority] = int32(s.MaxPriority)
	return args, nil
}

// priorityNeedsClassic refuses a priority queue that resolved to a quorum
// (or stream) queue: RabbitMQ refuses x-max-priority on them.
func priorityNeedsClassic(q driver.Queue, s declare.Spec) error {
	if !s.MaxPrioSet {
		return nil
	}
	if typ := queueType(q.Args); typ != string(QueueClassic) {
		return fmt.Errorf("the queue %q would be a %s queue with WithMaxPriority, which RabbitMQ refuses: priority queues are classic; add WithQueueType(topology.QueueClassic)", q.Name, typ)
	}
	return nil
}

// argInitialGroupSize is the RabbitMQ queue argument that sets how many
// cluster nodes a new quorum queue is replicated on.
const argInitialGroupSize = "x-quorum-initial-group-size"

// applyGroupSize adds WithInitialGroupSize's argument to q, whose type
// resolveQueue has decided, or says why it cannot.
func applyGroupSize(q driver.Queue, s declare.Spec) (driver.Queue, error) {
	if !s.GroupSizeSet {
		return q, nil
	}
	if s.GroupSize < 1 {
		return q, fmt.Errorf("the queue %q: WithInitialGroupSize(%d): a quorum queue needs at least one member; give the number of nodes to replicate it on, for example 3", q.Name, s.GroupSize)
	}
	if t, _ := q.Args[argQueueType].(string); t != string(QueueQuorum) {
		if t == "" {
			t = string(QueueClassic)
		}
		return q, fmt.Errorf("the queue %q is a %s queue: WithInitialGroupSize applies to quorum queues only; drop the option, or make the queue durable, not exclusive and not auto-delete (a quorum queue)", q.Name, t)
	}
	if v, ok := q.Args[argInitialGroupSize]; ok {
		if n, isInt := wire.Integer(v); !isInt || n != int64(s.GroupSize) {
			return q, fmt.Errorf("the queue %q sets %s to %v in its arguments and WithInitialGroupSize(%d): drop one", q.Name, argInitialGroupSize, v, s.GroupSize)
		}
	}
	q.Args[argInitialGroupSize] = int64(s.GroupSize)
	return q, nil
}
