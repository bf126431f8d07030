package cli

import "github.com/spf13/cobra"

// Options is what a command's options do once cobra has read the flags
// into them, in the order kubectl's commands do it: Complete takes the
// command and its arguments, Validate checks what the flags say before
// anything is read or connected, Run does the work.
type Options interface {
	Complete(cmd *cobra.Command, args []string)
	Validate() error
	Run() error
}

// RunE is the RunE of a command whose flags are read into o: it completes
// and validates o, then runs runF (a test's, when not nil) or o.Run.
func RunE[O Options](o O, runF func(O) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		o.Complete(cmd, args)
		if err := o.Validate(); err != nil {
			return err
		}
		if runF != nil {
			return runF(o)
		}
		return o.Run()
	}
}

// Invocation is the command and the arguments a command was run with.
// Embedded in a command's options, its Complete is theirs.
type Invocation struct {
	Cmd  *cobra.Command
	Args []string
}

// Complete records the command and its arguments.
func (in *Invocation) Complete(cmd *cobra.Command, args []string) { in.Cmd, in.Args = cmd, args }
