package saga_test

import (
	"context"
	"testing"

	"github.com/acemq/acemq/internal/storetest"
	"github.com/acemq/acemq/saga"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryLog(t *testing.T) {
	storetest.Saga(t, func(*testing.T) saga.Log { return saga.NewMemoryLog() })
}

func TestNewChecksItsSteps(t *testing.T) {
	l := saga.NewMemoryLog()
	for _, steps := range [][]saga.Step[int]{nil, {{Name: "a"}}, {{Do: nop}}, {{Name: "a", Do: nop}, {Name: "a", Do: nop}}} {
		if _, err := saga.New("s", l, steps).Run(t.Context(), "x", 0); err == nil {
			t.Errorf("steps %v accepted", steps)
		}
	}
}

func nop(context.Context, *int) error { return nil }
