package avro_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"

	"github.com/acemq/acemq/codec/avro"
	"github.com/acemq/acemq/internal/testenv"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// postgres opens ACEMQ_TEST_POSTGRES_DSN, skipping without it (failing in
// CI), and returns a store on a table of the test's own, dropped at the end.
func postgres(t *testing.T) (*avro.SQLStore, *sql.DB) {
	t.Helper()
	db, err := sql.Open("pgx", testenv.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	table := testenv.Table("acemq_avro_test")
	s, err := avro.NewSQLStore(db, table)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate twice: %v", err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table) })
	return s, db
}

func TestSQLStore(t *testing.T) {
	ctx := context.Background()
	store, _ := postgres(t)
	reg := avro.NewRegistry(store)
	id, err := reg.Register(ctx, orderSchema)
	if err != nil || id != 1 {
		t.Fatalf("Register = %d, %v", id, err)
	}
	if again, _ := reg.Register(ctx, orderSchema); again != id {
		t.Fatalf("the same bytes got %d then %d", id, again)
	}
	if other, _ := reg.Register(ctx, orderSchema+"\n"); other == id {
		t.Fatal("different bytes got the same id")
	}
	// Another process (a registry of its own) sees the same ids.
	fresh := avro.NewRegistry(store)
	if s, err := fresh.Schema(ctx, id); err != nil || s != orderSchema {
		t.Fatalf("Schema(%d) = %q, %v", id, s, err)
	}
	if _, err := fresh.Schema(ctx, 999); !errors.Is(err, avro.ErrNotFound) {
		t.Fatalf("an unknown id: %v", err)
	}
	if err := fresh.Put(ctx, 101, `"string"`); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Put(ctx, 101, `"string"`); err != nil {
		t.Fatalf("Put again: %v", err)
	}
	if err := fresh.Put(ctx, 101, `"long"`); !errors.Is(err, avro.ErrConflict) {
		t.Fatalf("another schema under 101: %v", err)
	}
	if err := fresh.Put(ctx, 102, `"string"`); !errors.Is(err, avro.ErrConflict) {
		t.Fatalf("the same schema under 102: %v", err)
	}
	// Registrations racing for new ids each get one id per schema.
	var wg sync.WaitGroup
	ids := make([]uint32, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := `{"type":"fixed","name":"F` + string(rune('a'+i)) + `","size":4}`
			var err error
			if ids[i], err = avro.NewRegistry(store).Register(ctx, s); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seen := map[uint32]bool{}
	for _, id := range ids {
		if seen[id] || id == 0 {
			t.Fatalf("racing registrations got ids %v", ids)
		}
		seen[id] = true
	}
	// A codec through the SQL store decodes a body the fixture's way.
	c, err := avro.NewRegistered(ctx, reg, orderSchema)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := c.Encode(order{ID: "sql"})
	var back order
	if err := must(avro.NewRegistered(ctx, avro.NewRegistry(store), orderSchema)).Decode(body, avro.ContentTypeRegistered, &back); err != nil || back.ID != "sql" {
		t.Fatalf("%+v %v", back, err)
	}
}
