package inbox_test

import (
	"context"
	"fmt"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/inbox"
)

// The same message handed to the wrapped handler twice runs it once; the
// second is answered Duplicate. With sqlstore's Inbox, WrapTx also commits
// the handler's writes with the confirmation.
func ExampleWrap() {
	ctx := context.Background()
	in := inbox.New(inbox.NewMemory(), "billing")
	h := inbox.Wrap(in, func(_ context.Context, m acemq.Message[string]) acemq.Ack {
		fmt.Println("billing", m.Payload)
		return acemq.Accept()
	})
	m := acemq.Message[string]{Payload: "invoice 7", Envelope: acemq.MustEnvelope(acemq.Fields{})}
	fmt.Println(h(ctx, m))
	fmt.Println(h(ctx, m), h(ctx, m).IsDuplicate())
	// Output:
	// billing invoice 7
	// accept
	// accept (duplicate) true
}
