package sqlcheckpoint_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/stream"
	"github.com/acemq/acemq/stream/sqlcheckpoint"
	"github.com/acemq/acemq/topology"
	_ "github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"))
}

// store opens a store on a table of the test's own, dropped at the end.
func store(t *testing.T) *sqlcheckpoint.Store {
	t.Helper()
	db, err := sql.Open("pgx", testenv.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	table := testenv.Table("acemq_checkpoints_test")
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table) })
	s := sqlcheckpoint.New(db, sqlcheckpoint.WithTable(table))
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("a second Migrate: %v", err)
	}
	return s
}

func TestLoadSave(t *testing.T) {
	s := store(t)
	ctx := context.Background()
	if _, ok, err := s.Load(ctx, "r"); ok || err != nil {
		t.Fatalf("Load of nothing = %v, %v", ok, err)
	}
	for _, off := range []int64{0, 41, 1 << 40} {
		if err := s.Save(ctx, "r", off); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := s.Load(ctx, "r"); !ok || err != nil || got != off {
			t.Fatalf("Load after Save(%d) = %d, %v, %v", off, got, ok, err)
		}
	}
	if _, ok, _ := s.Load(ctx, "other"); ok {
		t.Error("another reader's checkpoint was found")
	}
	if err := sqlcheckpoint.New(nil).Migrate(ctx); err == nil {
		t.Error("a store without a database migrated")
	}
	if _, _, err := sqlcheckpoint.New(&sql.DB{}, sqlcheckpoint.WithTable("x; drop")).Load(ctx, "r"); err == nil {
		t.Error("a bad table name was accepted")
	}
}

type event struct {
	N int `json:"n"`
}

// A reader that starts from its checkpoint in PostgreSQL, on both brokers.
func TestReaderResumesFromItsCheckpoint(t *testing.T) {
	s := store(t)
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := testenv.Unique(t, "stream")
		brokertest.DeleteAtEnd(t, c, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q))
		ctx := context.Background()
		if err := topology.New().Queue(q, topology.WithQueueType(topology.QueueStream)).Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
		pub := acemq.NewPublisher[event](c, "")
		send := func(from, to int) {
			for i := from; i < to; i++ {
				if _, err := pub.Send(ctx, q, event{N: i}); err != nil {
					t.Fatal(err)
				}
			}
		}
		readOnce := func(want int) []int {
			var mu sync.Mutex
			var got []int
			r, err := stream.Read(ctx, c, q, func(_ context.Context, m acemq.Message[event]) acemq.Ack {
				mu.Lock()
				got = append(got, m.Payload.N)
				mu.Unlock()
				return acemq.Accept()
			}, stream.WithOffset(stream.First()), stream.WithCheckpoints(s, "test@"+q), stream.WithCheckpointEvery(2))
			if err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, fmt.Sprintf("%d messages", want), func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) >= want
			})
			if err := r.Close(ctx); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			return got
		}
		send(0, 5)
		if got := readOnce(5); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
			t.Fatalf("the first read got %v", got)
		}
		send(5, 8)
		if got := readOnce(3); !slices.Equal(got, []int{5, 6, 7}) {
			t.Errorf("the reader from its checkpoint got %v, want [5 6 7]", got)
		}
	})
}
