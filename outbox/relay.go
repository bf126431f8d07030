package outbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/wire"
)

// Relay publishes the records of a Store through a connection: with
// confirms, mandatory unless recorded otherwise, in the order recorded per
// destination; a published record is deleted; a failed one is tried again
// after a doubling backoff and retired after its last allowed attempt,
// with its reason kept. A record recorded without an origin goes out with
// the connection's (acemq.WithOrigin). Several relays (in one process or
// many) may run on one store: no record is handed to two at once.
type Relay struct {
	conn  *acemq.Conn
	plumb *engine.Conn
	store Store
	cfg   relayConfig
	tel   *relayTelemetry
	err   error
}

// NewRelay returns a relay of store's records through conn. Mistakes in
// the options are returned by Run and Flush.
func NewRelay(conn *acemq.Conn, store Store, opts ...RelayOption) *Relay {
	r := &Relay{conn: conn, store: store, cfg: relayConfig{
		interval: DefaultInterval, batch: DefaultBatchSize, maxAttempts: DefaultMaxAttempts,
		backoff: DefaultBackoff, maxBackoff: DefaultMaxBackoff,
	}}
	for _, o := range opts {
		o.applyRelay(&r.cfg)
	}
	if n, ok := store.(Notifier); ok && r.cfg.notifier == nil && !r.cfg.noNotifier {
		r.cfg.notifier = n
	}
	r.plumb = engine.Of(conn)
	switch {
	case r.plumb == nil:
		r.err = errors.New("outbox: NewRelay was given a nil connection")
	case store == nil:
		r.err = errors.New("outbox: NewRelay was given a nil store")
	case r.cfg.interval <= 0:
		r.err = fmt.Errorf("outbox: WithInterval(%v): the interval must be positive", r.cfg.interval)
	case r.cfg.batch < 1:
		r.err = fmt.Errorf("outbox: WithBatchSize(%d): a batch holds at least one record", r.cfg.batch)
	case r.cfg.maxAttempts < 1:
		r.err = fmt.Errorf("outbox: WithMaxAttempts(%d): at least one attempt is needed", r.cfg.maxAttempts)
	case r.cfg.backoff <= 0 || r.cfg.maxBackoff < r.cfg.backoff:
		r.err = fmt.Errorf("outbox: WithBackoff(%v, %v): the first wait must be positive and at most the largest", r.cfg.backoff, r.cfg.maxBackoff)
	}
	if r.err == nil {
		r.tel = newRelayTelemetry(r.plumb)
	}
	return r
}

// Run relays until ctx is done, then returns nil. It polls every interval
// and, with a Notifier, as soon as records are stored. A store failure
// does not stop it (see WithOnError); only a mistake in the options does.
func (r *Relay) Run(ctx context.Context) error {
	if r.err != nil {
		return r.err
	}
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	if r.cfg.notifier != nil {
		lctx, stop := context.WithCancel(ctx)
		defer func() { stop(); wg.Wait() }()
		wg.Go(func() { r.listen(lctx, wake) })
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-t.C:
		}
		if _, err := r.Flush(ctx); err != nil && ctx.Err() == nil {
			r.report(err)
		}
		t.Reset(r.cfg.interval)
	}
}

// listen runs the notifier until ctx is done, restarting it a second after
// a failure.
func (r *Relay) listen(ctx context.Context, wake chan struct{}) {
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	for {
		err := r.cfg.notifier.Listen(ctx, signal)
		if ctx.Err() != nil {
			return
		}
		r.report(fmt.Errorf("outbox: the relay's notifier stopped (polling every %v meanwhile): %w", r.cfg.interval, err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		signal() // records may have been stored while it was down
	}
}

func (r *Relay) report(err error) {
	if r.cfg.onError != nil {
		r.cfg.onError(err)
	}
}

// Flush relays every record due now, batch after batch, and returns how
// many records it handed to the broker (published or not). It stops at the
// first store failure.
func (r *Relay) Flush(ctx context.Context) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	total := 0
	for {
		n, err := r.store.Relay(ctx, time.Now(), r.cfg.batch, func(recs []Record) []Result { return r.publish(ctx, recs) })
		total += n
		if err != nil {
			return total, fmt.Errorf("outbox: relaying: %w", err)
		}
		if n < r.cfg.batch || ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}

// publish sends one batch, pipelined, and says what became of each record.
func (r *Relay) publish(ctx context.Context, recs []Record) []Result {
	ctx, span := r.tel.start(ctx, len(recs))
	ms := make([]driver.Message, len(recs))
	origin := r.conn.Origin()
	for i, rec := range recs {
		ms[i] = driver.Message{
			Exchange:      rec.Exchange,
			RoutingKey:    rec.RoutingKey,
			Mandatory:     rec.Mandatory,
			AlwaysConfirm: true,
			Transient:     rec.Transient,
			ContentType:   rec.ContentType,
			MessageID:     rec.MessageID,
			Headers:       withOrigin(rec.Headers, origin),
			Body:          rec.Body,
		}
	}
	errs := r.plumb.PublishBatch(ctx, ms)
	now := time.Now()
	results := make([]Result, len(recs))
	var retired []Record
	for i, rec := range recs {
		if errs[i] == nil {
			results[i].Published = true
			r.tel.published(ctx, span, rec, now.Sub(rec.Recorded))
			continue
		}
		attempt := rec.Attempts + 1
		res := Result{Err: errs[i], Next: now.Add(r.wait(attempt)), Retire: attempt >= r.cfg.maxAttempts}
		results[i] = res
		r.tel.failed(ctx, span, rec, attempt, res.Retire, errs[i])
		if res.Retire {
			rec.Attempts, rec.LastError, rec.Retired = attempt, errs[i].Error(), now
			retired = append(retired, rec)
		}
	}
	span.End()
	if r.cfg.onRetire != nil && len(retired) > 0 {
		// Called before the store records the retirement; cheap callbacks
		// only (the batch's rows are still locked).
		for _, rec := range retired {
			r.cfg.onRetire(rec)
		}
	}
	return results
}

// withOrigin returns headers with origin as x-acemq-origin when they carry
// none (a record sent without an origin of its own), copied so that the
// store's record is left as it was.
func withOrigin(headers map[string]any, origin string) map[string]any {
	if _, ok := headers[wire.HeaderOrigin]; ok || origin == "" {
		return headers
	}
	h := maps.Clone(headers)
	if h == nil {
		h = make(map[string]any, 1)
	}
	h[wire.HeaderOrigin] = origin
	return h
}

// wait is the backoff after a record's attempt-th failure.
func (r *Relay) wait(attempt int) time.Duration {
	d := r.cfg.backoff
	for i := 1; i < attempt && d < r.cfg.maxBackoff; i++ {
		d *= 2
	}
	return min(d, r.cfg.maxBackoff)
}
