package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/topology"
)

func TestInitialGroupSizeArgument(t *testing.T) {
	plan, err := topology.New().Queue("orders", topology.WithInitialGroupSize(3)).Plan()
	if err != nil {
		t.Fatal(err)
	}
	args := queueIn(t, plan, "orders").Args
	if args["x-quorum-initial-group-size"] != int64(3) || args["x-queue-type"] != "quorum" {
		t.Fatalf("arguments %#v, want a quorum queue of 3", args)
	}
	// The same size in the arguments too is not a conflict.
	if _, err := topology.New().Queue("orders", topology.WithInitialGroupSize(3),
		topology.WithArguments(map[string]any{"x-quorum-initial-group-size": 3})).Plan(); err != nil {
		t.Fatalf("the same size twice: %v", err)
	}
}

func TestInitialGroupSizeMistakes(t *testing.T) {
	for _, tc := range []struct {
		topo *topology.Topology
		says string
	}{
		{topology.New().Queue("q", topology.WithInitialGroupSize(0)), "WithInitialGroupSize(0): a quorum queue needs at least one member"},
		{topology.New().Queue("q", topology.WithInitialGroupSize(3), topology.WithQueueType(topology.QueueClassic)), `the queue "q" is a classic queue: WithInitialGroupSize applies to quorum queues only`},
		{topology.New().Queue("q", topology.WithInitialGroupSize(3), topology.WithExclusive()), "is a classic queue"},
		{topology.New().Queue("q", topology.WithInitialGroupSize(3), topology.WithQueueType(topology.QueueStream)), "is a stream queue"},
		{topology.New().Queue("q", topology.WithInitialGroupSize(3), topology.WithArguments(map[string]any{"x-quorum-initial-group-size": 5})), "drop one"},
		{topology.New().Exchange("e", "direct", topology.WithInitialGroupSize(3)), "WithInitialGroupSize does not apply"},
		{topology.New().Bind("e", "q", "k", topology.WithInitialGroupSize(3)), "WithInitialGroupSize does not apply"},
	} {
		if err := tc.topo.Validate(); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Validate: %v, want it to say %q", err, tc.says)
		}
	}
}

// TestInitialGroupSizeDeclares: both brokers take the queue (a single node
// places the one member it has), and a consumer of it works.
func TestInitialGroupSizeDeclares(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := testenv.Unique(t, "group")
		brokertest.DeleteAtEnd(t, c, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		topo := topology.New().Queue(q, topology.WithInitialGroupSize(3))
		if err := topo.Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
		drift, err := topo.Drift(ctx, c, topology.WithSettingsProbe())
		if err != nil || len(drift) != 0 {
			t.Fatalf("drift after applying: %v %v", drift, err)
		}
		err = c.Raw(func(dc driver.Conn) error {
			_, err := dc.DeclareQueue(ctx, driver.Queue{Name: testenv.Unique(t, "zero"), Durable: true,
				Args: driver.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": int64(0)}})
			return err
		})
		var pe *driver.PreconditionError
		if !errors.As(err, &pe) || !strings.Contains(pe.Detail, "x-quorum-initial-group-size") {
			t.Fatalf("a group size of 0 declared raw: %v, want the broker's refusal", err)
		}
		t.Logf("the broker refuses size 0: %s", pe.Detail)
	})
}

// queueIn returns the declaration of the queue name in plan.
func queueIn(t *testing.T, plan topology.Plan, name string) driver.Queue {
	t.Helper()
	for _, d := range plan {
		if d.Kind == topology.QueueDeclaration && d.Queue.Name == name {
			return d.Queue
		}
	}
	t.Fatalf("no queue %q in the plan:\n%s", name, plan)
	return driver.Queue{}
}
