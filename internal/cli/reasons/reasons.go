// Package reasons holds the acemq command's error types whose names travel
// on the wire. The family writes an error as "TypeName: message", with the
// Go type's name, in a failure reply (acemq-error) and in a dead letter's
// x-acemq-error, so these names are part of what callers and operators
// read ("CommandError: boom" is what `acemq ask` prints when a command run
// by `acemq serve` fails). They are exported, as such names must be to read
// well, from a package of their own rather than from package main.
package reasons

// CommandError is the failure `acemq serve` sends back when its COMMAND
// exits non-zero: the last line of its standard error. Callers see it as
// "CommandError: <line>".
type CommandError struct {
	// Line is the last non-empty line the command wrote on standard error,
	// or a description of how it ended when it wrote none.
	Line string
	// ExitCode is the command's exit status (-1 when it was killed).
	ExitCode int
}

func (e *CommandError) Error() string { return e.Line }

// InvalidOrderError is the demo's reason for rejecting an order; the dead
// letter's x-acemq-error reads "…: InvalidOrderError: …".
type InvalidOrderError struct{ ID, Reason string }

func (e *InvalidOrderError) Error() string { return "order " + e.ID + " is not valid: " + e.Reason }

// UnknownSKUError is the demo pricing service's failure; the caller sees
// "UnknownSKUError: no price for SKU …".
type UnknownSKUError struct{ SKU string }

func (e *UnknownSKUError) Error() string { return "no price for SKU " + e.SKU }
