// Package storetest holds the checks every inbox, outbox and saga store
// must pass, run against the memory stores and the SQL stores on each
// database, so that all of them keep the same contract.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/inbox"
	"github.com/acemq/acemq/outbox"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Inbox checks an inbox store's claims, confirmations, releases, leases
// and pruning.
func Inbox(t *testing.T, newStore func(t *testing.T) inbox.Store) {
	t.Run("claim-confirm-duplicate", func(t *testing.T) {
		s, ctx, now := newStore(t), ctxFor(t), time.Now()
		must(t, s.Claim, ctx, "c", "k1", "tok-a", now, time.Minute, inbox.Claimed)
		must(t, s.Claim, ctx, "c", "k1", "tok-b", now, time.Minute, inbox.Held)
		// Another consumer name is another key space.
		must(t, s.Claim, ctx, "other", "k1", "tok-c", now, time.Minute, inbox.Claimed)
		if err := s.Confirm(ctx, "c", "k1", "tok-b", now); !errors.Is(err, inbox.ErrClaimLost) {
			t.Fatalf("confirming with a token that does not hold the claim: %v, want ErrClaimLost", err)
		}
		if err := s.Confirm(ctx, "c", "k1", "tok-a", now); err != nil {
			t.Fatal(err)
		}
		must(t, s.Claim, ctx, "c", "k1", "tok-d", now.Add(time.Hour), time.Minute, inbox.Done)
		// A release after the confirmation changes nothing.
		if err := s.Release(ctx, "c", "k1", "tok-a"); err != nil {
			t.Fatal(err)
		}
		must(t, s.Claim, ctx, "c", "k1", "tok-e", now, time.Minute, inbox.Done)
	})
	t.Run("release-and-lease", func(t *testing.T) {
		s, ctx, now := newStore(t), ctxFor(t), time.Now()
		must(t, s.Claim, ctx, "c", "k", "a", now, time.Minute, inbox.Claimed)
		if err := s.Release(ctx, "c", "k", "not-mine"); err != nil {
			t.Fatal(err)
		}
		must(t, s.Claim, ctx, "c", "k", "b", now, time.Minute, inbox.Held)
		if err := s.Release(ctx, "c", "k", "a"); err != nil {
			t.Fatal(err)
		}
		must(t, s.Claim, ctx, "c", "k", "b", now, time.Minute, inbox.Claimed)
		// b's lease runs out: c takes the key over, and b's confirmation
		// is refused.
		must(t, s.Claim, ctx, "c", "k", "c", now.Add(2*time.Minute), time.Minute, inbox.Claimed)
		if err := s.Confirm(ctx, "c", "k", "b", now.Add(2*time.Minute)); !errors.Is(err, inbox.ErrClaimLost) {
			t.Fatalf("a confirmation after the lease was taken over: %v, want ErrClaimLost", err)
		}
		if err := s.Confirm(ctx, "c", "k", "c", now.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("prune", func(t *testing.T) {
		s, ctx, now := newStore(t), ctxFor(t), time.Now()
		must(t, s.Claim, ctx, "c", "expired", "a", now.Add(-time.Hour), time.Minute, inbox.Claimed)
		must(t, s.Claim, ctx, "c", "live", "a", now, time.Hour, inbox.Claimed)
		must(t, s.Claim, ctx, "c", "old", "a", now.Add(-48*time.Hour), time.Minute, inbox.Claimed)
		if err := s.Confirm(ctx, "c", "old", "a", now.Add(-48*time.Hour)); err != nil {
			t.Fatal(err)
		}
		must(t, s.Claim, ctx, "c", "recent", "a", now, time.Minute, inbox.Claimed)
		if err := s.Confirm(ctx, "c", "recent", "a", now); err != nil {
			t.Fatal(err)
		}
		n, err := s.Prune(ctx, now, now.Add(-24*time.Hour))
		if err != nil || n != 2 {
			t.Fatalf("pruned %d (%v), want 2: the expired claim and the old confirmation", n, err)
		}
		must(t, s.Claim, ctx, "c", "live", "b", now, time.Minute, inbox.Held)
		must(t, s.Claim, ctx, "c", "recent", "b", now, time.Minute, inbox.Done)
		must(t, s.Claim, ctx, "c", "old", "b", now, time.Minute, inbox.Claimed)
	})
	t.Run("concurrent-claims", func(t *testing.T) {
		s, ctx, now := newStore(t), ctxFor(t), time.Now()
		var mu sync.Mutex
		counts := map[inbox.State]int{}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				st, err := s.Claim(ctx, "c", "race", fmt.Sprint("tok", i), now, time.Minute)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				counts[st]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if counts[inbox.Claimed] != 1 || counts[inbox.Held] != 7 {
			t.Fatalf("8 concurrent claims of one key: %v, want one claimed and 7 held", counts)
		}
	})
}

func must(t *testing.T, claim func(context.Context, string, string, string, time.Time, time.Duration) (inbox.State, error),
	ctx context.Context, c, k, tok string, now time.Time, lease time.Duration, want inbox.State) {
	t.Helper()
	st, err := claim(ctx, c, k, tok, now, lease)
	if err != nil {
		t.Fatalf("claiming %s/%s: %v", c, k, err)
	}
	if st != want {
		t.Fatalf("claiming %s/%s with %s: %s, want %s", c, k, tok, st, want)
	}
}

// AllHeaderTypes is a header table holding every AMQP field type, nested
// ones included.
func AllHeaderTypes() driver.Table {
	return driver.Table{
		"s": "text", "b": []byte{0, 1, 255}, "t": true, "i8": int8(-8), "i16": int16(-1600), "i32": int32(42),
		"i64": int64(1) << 60, "u8": uint8(200), "u16": uint16(60000), "u32": uint32(4000000000),
		"f32": float32(1.5), "f64": 2.25, "whole": float64(3), "ts": time.UnixMilli(1700000000123).UTC(),
		"dec": driver.Decimal{Scale: 2, Value: 12345}, "nil": nil,
		"arr":   []any{int32(1), "two", []any{int64(3)}, driver.Table{"k": int16(4)}},
		"table": driver.Table{"inner": int32(7), "deeper": driver.Table{"x": []byte("y")}},
	}
}

func record(ex, rk, id string, recorded time.Time) outbox.Record {
	return outbox.Record{MessageID: id, Exchange: ex, RoutingKey: rk, ContentType: "application/json",
		Headers: AllHeaderTypes(), Body: []byte(`{"n":` + id + `}`), Mandatory: true, Recorded: recorded.Truncate(time.Millisecond)}
}

// Outbox checks an outbox store: records kept whole, order per
// destination, failures, retirement, revival, status, and relays that
// never share a record.
func Outbox(t *testing.T, newStore func(t *testing.T) outbox.Store) {
	t.Run("whole-record-in-order", func(t *testing.T) {
		s, ctx := newStore(t), ctxFor(t)
		now := time.Now()
		if err := s.Add(ctx, nil, record("ex", "a", "1", now), record("ex", "b", "2", now), record("ex", "a", "3", now)); err != nil {
			t.Fatal(err)
		}
		var got []outbox.Record
		n, err := s.Relay(ctx, now, 10, func(rs []outbox.Record) []outbox.Result {
			got = rs
			out := make([]outbox.Result, len(rs))
			for i := range out {
				out[i].Published = true
			}
			return out
		})
		if err != nil || n != 3 {
			t.Fatalf("relay: %d, %v", n, err)
		}
		want := record("ex", "a", "1", now)
		if r := got[0]; r.MessageID != "1" || r.Exchange != "ex" || r.RoutingKey != "a" || r.ContentType != want.ContentType ||
			string(r.Body) != string(want.Body) || !r.Mandatory || r.Transient || !r.Recorded.Equal(want.Recorded) {
			t.Errorf("record read back as %+v", r)
		}
		if msg := diffTables(got[0].Headers, AllHeaderTypes()); msg != "" {
			t.Errorf("headers changed in storage: %s", msg)
		}
		if got[0].MessageID != "1" || got[1].MessageID != "2" || got[2].MessageID != "3" {
			t.Errorf("order %s %s %s, want 1 2 3", got[0].MessageID, got[1].MessageID, got[2].MessageID)
		}
		if n, err := s.Relay(ctx, now, 10, nil); err != nil || n != 0 {
			t.Fatalf("published records are handed out again: %d, %v", n, err)
		}
	})
	t.Run("failure-backoff-retire-revive", func(t *testing.T) {
		s, ctx := newStore(t), ctxFor(t)
		now := time.Now()
		if err := s.Add(ctx, nil, record("ex", "a", "1", now), record("ex", "a", "2", now), record("ex", "b", "3", now)); err != nil {
			t.Fatal(err)
		}
		fail := errors.New("NOT_FOUND - no exchange 'ex'")
		// 1 fails; 2 (same destination) is not tried; 3 is published.
		_, err := s.Relay(ctx, now, 10, func(rs []outbox.Record) []outbox.Result {
			out := make([]outbox.Result, len(rs))
			for i, r := range rs {
				switch r.MessageID {
				case "1":
					out[i] = outbox.Result{Err: fail, Next: now.Add(time.Minute)}
				case "3":
					out[i].Published = true
				}
			}
			return out
		})
		if err != nil {
			t.Fatal(err)
		}
		// Before the backoff ends nothing of destination a is due: 2 waits
		// behind 1.
		if n, err := s.Relay(ctx, now.Add(time.Second), 10, func(rs []outbox.Record) []outbox.Result {
			t.Errorf("handed %d records during 1's backoff (first %s)", len(rs), rs[0].MessageID)
			return make([]outbox.Result, len(rs))
		}); err != nil || n != 0 {
			t.Fatalf("%d, %v", n, err)
		}
		if st := status(t, s, ctx); st["ex/a"].Pending != 2 || st["ex/b"].Pending != 0 {
			t.Errorf("status %+v", st)
		}
		// After it, 1 comes first; it fails for the last time and retires;
		// 2 then goes ahead.
		later := now.Add(2 * time.Minute)
		_, err = s.Relay(ctx, later, 1, func(rs []outbox.Record) []outbox.Result {
			if rs[0].MessageID != "1" || rs[0].Attempts != 1 || rs[0].LastError != fail.Error() {
				t.Errorf("retry of %s with attempts %d, error %q", rs[0].MessageID, rs[0].Attempts, rs[0].LastError)
			}
			return []outbox.Result{{Err: fail, Next: later.Add(time.Hour), Retire: true}}
		})
		if err != nil {
			t.Fatal(err)
		}
		st := status(t, s, ctx)["ex/a"]
		if st.Pending != 1 || st.Retired != 1 || st.OldestPending.IsZero() {
			t.Errorf("after retiring 1: %+v", st)
		}
		var next string
		if _, err := s.Relay(ctx, later, 10, func(rs []outbox.Record) []outbox.Result {
			next = rs[0].MessageID
			return []outbox.Result{{Published: true}}
		}); err != nil || next != "2" {
			t.Fatalf("after a retirement the next record is %q (%v), want 2", next, err)
		}
		if in, ok := s.(outbox.Inspector); ok {
			ret, err := in.Retired(ctx, 10)
			if err != nil || len(ret) != 1 || ret[0].MessageID != "1" || ret[0].Attempts != 2 || ret[0].LastError != fail.Error() || ret[0].Retired.IsZero() {
				t.Fatalf("retired: %+v, %v", ret, err)
			}
			if n, err := in.Revive(ctx); err != nil || n != 1 {
				t.Fatalf("revive: %d, %v", n, err)
			}
			var again outbox.Record
			if _, err := s.Relay(ctx, time.Now().Add(time.Second), 10, func(rs []outbox.Record) []outbox.Result {
				again = rs[0]
				return []outbox.Result{{Published: true}}
			}); err != nil || again.MessageID != "1" || again.Attempts != 0 {
				t.Fatalf("a revived record: %+v, %v", again, err)
			}
			if st := status(t, s, ctx); len(st) != 0 {
				t.Errorf("status after everything was published: %+v", st)
			}
		}
	})
	t.Run("two-relays-never-share", func(t *testing.T) {
		s, ctx := newStore(t), ctxFor(t)
		now := time.Now()
		const n = 200
		var recs []outbox.Record
		for i := range n {
			recs = append(recs, record("ex", fmt.Sprint("d", i%4), fmt.Sprint(i), now))
		}
		if err := s.Add(ctx, nil, recs...); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		seen := map[string]int{}
		order := map[string][]string{}
		inFlight := map[string]bool{}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for {
					k, err := s.Relay(ctx, now, 7, func(rs []outbox.Record) []outbox.Result {
						mu.Lock()
						for _, r := range rs {
							if inFlight[r.MessageID] {
								t.Errorf("record %s handed to both relays at once", r.MessageID)
							}
							inFlight[r.MessageID] = true
							seen[r.MessageID]++
							order[r.RoutingKey] = append(order[r.RoutingKey], r.MessageID)
						}
						mu.Unlock()
						time.Sleep(time.Millisecond)
						mu.Lock()
						for _, r := range rs {
							delete(inFlight, r.MessageID)
						}
						mu.Unlock()
						out := make([]outbox.Result, len(rs))
						for i := range out {
							out[i].Published = true
						}
						return out
					})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					done := len(seen) == n
					mu.Unlock()
					if done {
						return
					}
					if k == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
		for id, c := range seen {
			if c != 1 {
				t.Errorf("record %s relayed %d times", id, c)
			}
		}
		for d, ids := range order {
			for i := 1; i < len(ids); i++ {
				var a, b int
				fmt.Sscan(ids[i-1], &a)
				fmt.Sscan(ids[i], &b)
				if b < a {
					t.Errorf("destination %s: %d relayed after %d", d, b, a)
				}
			}
		}
	})
}

func status(t *testing.T, s outbox.Store, ctx context.Context) map[string]outbox.DestinationStatus {
	t.Helper()
	in, ok := s.(outbox.Inspector)
	if !ok {
		return nil
	}
	st, err := in.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]outbox.DestinationStatus{}
	for _, d := range st {
		out[d.Exchange+"/"+d.RoutingKey] = d
	}
	return out
}

// diffTables reports the first difference, type included, between two
// header tables ("" when they are equal).
func diffTables(got, want driver.Table) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d headers, want %d", len(got), len(want))
	}
	for k, w := range want {
		if msg := diffValue(got[k], w); msg != "" {
			return k + ": " + msg
		}
	}
	return ""
}

// DiffValue reports the first difference, type included, between two
// header values ("" when they are equal).
func DiffValue(got, want any) string { return diffValue(got, want) }

func diffValue(got, want any) string {
	if fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
		return fmt.Sprintf("%T %v, want %T %v", got, got, want, want)
	}
	switch w := want.(type) {
	case []byte:
		if string(got.([]byte)) != string(w) {
			return fmt.Sprintf("%v, want %v", got, w)
		}
	case []any:
		g := got.([]any)
		if len(g) != len(w) {
			return fmt.Sprintf("%d elements, want %d", len(g), len(w))
		}
		for i := range w {
			if msg := diffValue(g[i], w[i]); msg != "" {
				return fmt.Sprintf("[%d]: %s", i, msg)
			}
		}
	case driver.Table:
		return diffTables(got.(driver.Table), w)
	case time.Time:
		if !got.(time.Time).Equal(w) {
			return fmt.Sprintf("%v, want %v", got, w)
		}
	default:
		if got != want {
			return fmt.Sprintf("%v, want %v", got, want)
		}
	}
	return ""
}
