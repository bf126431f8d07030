package acemq

import (
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
)

// envelopeWriter is the engine.EnvelopeWriter of the packages built on
// acemq that publish messages of their own (rpc): it writes an envelope's
// headers as a Publisher does, with their encoded size and through boxes
// of its own (header_boxes.go).
type envelopeWriter struct{ boxes headerBoxes }

// newEnvelopeWriter makes an envelopeWriter, as the engine.Conn of every
// connection does for NewEnvelopeWriter.
func newEnvelopeWriter() any { return engine.EnvelopeWriter[Envelope](&envelopeWriter{}) }

// WriteHeaders writes env's headers for routingKey into a new table, with
// the table's encoded size (0 when a value is not a flat scalar). The zero
// Envelope is written as a fresh one, as AppendHeaders writes it.
func (w *envelopeWriter) WriteHeaders(env Envelope, routingKey string) (driver.Table, int) {
	if !env.built() {
		env = env.orDefault()
	}
	return env.writeHeaders(nil, routingKey, &w.boxes)
}
