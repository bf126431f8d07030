package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/schedule"
	"github.com/spf13/cobra"
)

// schedulerCounters are what serve --scheduler reports when it stops.
type schedulerCounters struct {
	Handled int64 `json:"handled"`
}

// runScheduler runs the scheduler's control consumer until SIGINT or
// SIGTERM.
func runScheduler(cmd *cobra.Command, f serveFlags) error {
	if f.concurrency < 1 {
		return withCode(exitFailure, fmt.Errorf("--concurrency must be at least 1, not %d", f.concurrency))
	}
	s, err := openSession(cmd, f.metricsAddr)
	if err != nil {
		return err
	}
	defer s.close()
	errOut := cmd.ErrOrStderr()
	if isMemory(s.url) {
		fmt.Fprintf(errOut, "note: %s\n", memoryNote(s.url))
	}
	var handled atomic.Int64
	remove := s.conn.OnSettle(func(st acemq.Settlement) {
		if st.Queue == schedule.DueQueue && st.Outcome == acemq.OutcomeAcked {
			handled.Add(1)
		}
	})
	defer remove()
	ctx, cancel := context.WithTimeout(cmd.Context(), connectTimeout)
	defer cancel()
	opts := []schedule.ServeOption{}
	if cmd.Flags().Changed("concurrency") {
		opts = append(opts, schedule.WithConcurrency(f.concurrency))
	}
	ctrl, err := schedule.Serve(ctx, s.conn, opts...)
	if err != nil {
		return withCode(exitFailure, fmt.Errorf("starting the scheduler: %w%s", err, s.hint()))
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
		b, _ := marshalLine(c)
		_, _ = cmd.OutOrStdout().Write(b)
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "handled %d\n", c.Handled)
	}
	if stopErr != nil {
		return withCode(exitFailure, stopErr)
	}
	return nil
}
