// Package partition is the partition command: where a key goes among N
// partitions, by the family's rule.
package partition

import (
	"fmt"
	"hash/fnv"

	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/partition"
	"github.com/spf13/cobra"
)

// Options are partition's flags and KEY, read by NewCmd's command.
type Options struct {
	cli.Invocation

	partitions int
	base       string
	json       bool
}

// partitionJSON is the output of partition --json.
type partitionJSON struct {
	Key        string `json:"key"`
	Partitions int    `json:"partitions"`
	Partition  int    `json:"partition"`
	RoutingKey string `json:"routingKey,omitempty"` // with --base only
	Hash       uint32 `json:"hash"`
}

// NewCmd is the partition command. When runF is not nil it runs instead
// of the command's own Run, once the flags are read and valid.
func NewCmd(runF func(*Options) error) *cobra.Command {
	f := &Options{}
	cmd := &cobra.Command{
		Use:   "partition KEY --partitions N [--base B] [--json]",
		Short: "Print the partition and routing key a key goes to",
		Long: `partition prints where a key goes among N partitions, by the family's rule
(docs/wire.md §5.10): FNV-1a 32-bit over the key's UTF-8 bytes, the unsigned
hash modulo N, routing key {base}.{n}. It needs no broker.

--json prints one object: key, partitions, partition, routingKey (with
--base) and hash (the unsigned 32-bit FNV-1a value).`,
		Example: `  acemq partition customer-42 --partitions 8 --base orders
  acemq partition customer-42 --partitions 8 --json`,
		Args: cobra.ExactArgs(1),
		RunE: cli.RunE(f, runF),
	}
	fl := cmd.Flags()
	fl.IntVar(&f.partitions, "partitions", 0, "the number of partitions")
	fl.StringVar(&f.base, "base", "", "the partitions' base name, to print the routing key {base}.{n}")
	fl.BoolVar(&f.json, "json", false, "print one JSON object")
	_ = cmd.MarkFlagRequired("partitions")
	return cmd
}

// Validate checks --partitions.
func (f *Options) Validate() error {
	if f.partitions < 1 {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--partitions must be at least 1, not %d", f.partitions))
	}
	return nil
}

// Run prints where KEY goes.
func (f *Options) Run() error {
	cmd, key := f.Cmd, f.Args[0]
	p := partition.Of(key, f.partitions)
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	out := partitionJSON{Key: key, Partitions: f.partitions, Partition: p, Hash: h.Sum32()}
	if f.base != "" {
		out.RoutingKey = partition.RoutingKey(f.base, p)
	}
	if f.json {
		line, err := cli.MarshalLine(out)
		if err != nil {
			return cli.WithCode(cli.ExitFailure, err)
		}
		_, err = cmd.OutOrStdout().Write(line)
		return err
	}
	rk := ""
	if out.RoutingKey != "" {
		rk = ", routing key " + out.RoutingKey
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "key %q → partition %d of %d%s (FNV-1a 0x%08x)\n", key, p, f.partitions, rk, out.Hash)
	return err
}
