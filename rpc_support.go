package acemq

// Codec is the codec the option chooses. It exists for packages built on
// acemq that take ConsumeOption values and must also write in the format
// they read: rpc.Serve reads requests with the consumer's codec and encodes
// its replies with the same one.
func (o CodecOption) Codec() Codec { return o.codec }
