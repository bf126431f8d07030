package perf

import (
	"os"
	"testing"

	"github.com/acemq/acemq/internal/testenv"
	_ "github.com/acemq/acemq/rabbitmq"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if Counting() {
		// Under callgrind the leak check's retries, each dumping every
		// goroutine's stack, would be counted, and their number varies
		// from run to run.
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}

// The harness's names, as the benchmarks of this package spell them.
const (
	window   = Window
	senders  = Senders
	prefetch = Prefetch
	quorum   = Quorum
	classic  = Classic
)

type (
	side      = Side
	queueKind = QueueKind
)

var (
	unique          = Unique
	ctxFor          = CtxFor
	dialRaw         = OpenRaw
	connect         = Connect
	declare         = Declare
	fill            = Fill
	cpuClock        = CPUClock
	startMeter      = StartMeter
	compare         = Compare
	newFullEnvelope = NewFullEnvelope
	fullTable       = FullTable
)

// rawHeaders is what a careful application writes with plain amqp091 to
// carry the same information as a full envelope: the same header names and
// values acemq writes (FullEnvelope's table). Used only by the raw+headers
// variants.
func rawHeaders(id string) amqp.Table { return fullTable.For(id, "") }

func brokerURL(tb testing.TB) string { return testenv.AMQPURL(tb) }
