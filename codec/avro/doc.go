// Package avro is the Avro codec of the AceMQ family in both of its modes
// (docs/wire.md §4.3), on github.com/hamba/avro/v2:
//
//	Registered  application/vnd.acemq.avro  0x00, schema id (4 bytes, big-endian), Avro binary
//	Fixed       avro/binary                 Avro binary, the schema agreed out of band
//
// Both also read application/avro and *+avro. A codec dispatches on the
// content type first; only for those two ambiguous types does it look at
// the body's first byte. A fixed-schema codec never decodes a
// registry-framed body: it refuses application/vnd.acemq.avro, and a body
// of an ambiguous type that begins 0x00 with room for a schema id, rather
// than read its frame as data.
//
// A registered codec finds the writer's schema in a Registry by the id in
// the body. By default it decodes in its own (reader) schema's shape,
// resolving the writer's schema to it: a field the writer did not write is
// filled from the reader's default, one the reader does not declare is
// skipped. That is the family's "resolved" shape, the one that lets
// producers be redeployed with a new schema before their consumers.
// WithResolve(false), or a codec made without a schema, decodes in the
// writer's shape instead.
//
// A Registry stores schemas in a Store: NewMemoryStore, or NewSQLStore on
// PostgreSQL. Registration is idempotent on content: the same schema bytes
// always get the same id. A schema's fingerprint is the SHA-256 of its exact
// bytes, so a reformatted schema is a new schema.
//
// The package is named avro, like github.com/hamba/avro/v2's: a program that
// needs both imports one under another name (the codec's own code calls
// hamba's "hamba").
//
// Decoding is bounded by the body: no string, byte string or array may
// claim more than the body could hold, so a hostile length costs an error,
// not memory. Before decoding, a body is walked against the writer's
// schema: it must hold exactly one value (a truncated body, or bytes after
// the value, are refused) nesting records, arrays and maps at most
// DefaultMaxDepth deep (WithMaxDepth), and it may be at most
// DefaultMaxBodySize bytes (WithMaxBodySize); a body over a bound is
// refused with an *acemq.LimitError.
package avro
