package route

import "github.com/acemq/acemq"

// The package's options follow the module's rule: every option is a
// function named With…, returning one of the option interfaces below.
// Step and Serve take acemq.ConsumeOption values: a step is a consumer.

// A PipelineOption configures NewPipeline.
type PipelineOption interface{ applyPipeline(*pipelineConfig) }

// A StartOption configures Pipeline.Start and StartSlip.
type StartOption interface{ applyStart(*startConfig) }

// An Option configures both: given to NewPipeline, every run and step of
// the pipeline; given to Start or StartSlip, that run's first message.
type Option interface {
	PipelineOption
	StartOption
}

type pipelineConfig struct {
	codec acemq.Codec
}

type startConfig struct {
	env   acemq.Envelope
	codec acemq.Codec
}

type startOption func(*startConfig)

func (f startOption) applyStart(c *startConfig) { f(c) }

type codecOption struct{ c acemq.Codec }

func (o codecOption) applyPipeline(c *pipelineConfig) { c.codec = o.c }
func (o codecOption) applyStart(c *startConfig)       { c.codec = o.c }

// WithCodec sets the codec (default acemq.JSON): given to NewPipeline, the
// one its runs start with and its steps read and forward with (a step's
// own acemq.WithCodec overrides it for that step); given to Start or
// StartSlip, the one that run's first message is encoded with.
func WithCodec(c acemq.Codec) Option { return codecOption{c} }

// WithEnvelope starts the run with env (built with acemq.NewEnvelope) for
// its type, correlation, causation and application headers. Its route
// fields are replaced by the run's.
func WithEnvelope(env acemq.Envelope) StartOption {
	return startOption(func(c *startConfig) { c.env = env })
}
