package engine

// Carrier lets an option value that embeds it carry a value a package
// built on acemq reads back with Carried: the codec option of package acemq
// carries its acemq.Codec, so that a package taking acemq.ConsumeOption
// values (rpc.Serve, route.Step) can write in the format its consumer
// reads. Its one method is unexported: embedding it adds nothing to the
// option's API.
type Carrier struct{ v any }

// Carry returns a Carrier of v.
func Carry(v any) Carrier { return Carrier{v} }

func (c Carrier) carried() any { return c.v }

// Carried returns the T carried by the last of opts that carries one, else
// def.
func Carried[T any, O any](opts []O, def T) T {
	for _, o := range opts {
		if c, ok := any(o).(interface{ carried() any }); ok {
			if v, ok := c.carried().(T); ok {
				def = v
			}
		}
	}
	return def
}
