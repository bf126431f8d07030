package pgnotify_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acemq/acemq/internal/sqltest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/outbox/pgnotify"
	"github.com/acemq/acemq/sqlstore"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Listen wakes once when it starts and once per notification, and ends
// with its context.
func TestListenWakes(t *testing.T) {
	db := sqltest.Open(t, sqlstore.Postgres)
	ch := testenv.Table("t_chan")
	ctx, cancel := context.WithCancel(t.Context())
	var wakes atomic.Int32
	woke := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() {
		done <- pgnotify.New(db, ch).Listen(ctx, func() { wakes.Add(1); woke <- struct{}{} })
	}()
	<-woke // listening
	for range 2 {
		if _, err := db.Exec("SELECT pg_notify($1, '')", ch); err != nil {
			t.Fatal(err)
		}
		<-woke
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Listen ended with %v, want context.Canceled", err)
	}
	if wakes.Load() != 3 {
		t.Errorf("%d wakes, want 3", wakes.Load())
	}
}

// A pool of another driver is refused with a message that says which to
// use.
func TestListenNeedsPgx(t *testing.T) {
	db := sqltest.Open(t, sqlstore.MySQL)
	err := pgnotify.New(db, "c").Listen(t.Context(), func() {})
	if err == nil || !strings.Contains(err.Error(), "pgx") {
		t.Fatalf("%v, want an error naming pgx", err)
	}
}
