package serve

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/schedule"
	"github.com/spf13/cobra"
)

// schedulerCounters are what serve --scheduler reports when it stops.
type schedulerCounters struct {
	Handled int64 `json:"handled"`
}

// runScheduler runs the scheduler's control consumer until SIGINT or
// SIGTERM.
func runScheduler(cmd *cobra.Command, f Options) error {
	s, err := cli.OpenSession(cmd, f.metricsAddr)
	if err != nil {
		return err
	}
	defer s.Close()
	errOut := cmd.ErrOrStderr()
	if cli.IsMemory(s.URL) {
		fmt.Fprintf(errOut, "note: %s\n", cli.MemoryNote(s.URL))
	}
	var handled atomic.Int64
	remove := s.Conn.OnSettle(func(st acemq.Settlement) {
		if st.Queue == schedule.DueQueue && st.Outcome == acemq.OutcomeAcked {
			handled.Add(1)
		}
	})
	defer remove()
	ctx, cancel := context.WithTimeout(cmd.Context(), cli.ConnectTimeout)
	defer cancel()
	opts := []schedule.ServeOption{}
	if cmd.Flags().Changed("concurrency") {
		opts = append(opts, schedule.WithConcurrency(f.concurrency))
	}
	ctrl, err := schedule.Serve(ctx, s.Conn, opts...)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("starting the scheduler: %w%s", err, s.Hint()))
	}
	fmt.Fprintf(errOut, "scheduling: reading %s (rungs %v); SIGINT or SIGTERM stops\n", schedule.DueQueue, schedule.Rungs())

	var stopErr error
	select {
	case <-cmd.Context().Done():
	case <-ctrl.Done():
		stopErr = errors.New("the scheduler's control consumer stopped (was " + schedule.DueQueue + " deleted?)")
	}
	dctx, dcancel := context.WithTimeout(context.Background(), f.drain+5*time.Second)
	defer dcancel()
	if err := ctrl.Close(dctx); err != nil {
		fmt.Fprintf(errOut, "acemq: stopping the scheduler: %v\n", err)
	}
	c := schedulerCounters{Handled: handled.Load()}
	if f.json {
		b, _ := cli.MarshalLine(c)
		_, _ = cmd.OutOrStdout().Write(b)
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "handled %d\n", c.Handled)
	}
	if stopErr != nil {
		return cli.WithCode(cli.ExitFailure, stopErr)
	}
	return nil
}
