package retry_test

import (
	"fmt"
	"time"

	"github.com/acemq/acemq/retry"
)

func ExampleExponential() {
	p := retry.Exponential(6, 10*time.Second, 5*time.Minute).GiveUpAfter(time.Hour)
	fmt.Println(p)
	fmt.Println(p.Schedule())

	// Lower the threshold and every wait of a second or more goes to the
	// broker; a threshold of 0 keeps every wait in the consumer.
	fmt.Println(retry.Fixed(3, time.Second).WaitInBrokerFrom(time.Second))
	fmt.Println(p.WaitInBrokerFrom(0))
	// Output:
	// exponential(6, 10s, 5m).giveUpAfter(1h)
	// [10s 20s 40s 1m20s 2m40s]
	// fixed(3, 1s).waitInBrokerFrom(1s)
	// exponential(6, 10s, 5m).giveUpAfter(1h).waitInBrokerFrom(0ms)
}

func ExamplePolicy_Err() {
	p := retry.Exponential(0, time.Second, time.Minute)
	fmt.Println(p.Err())
	fmt.Println(retry.None() == retry.Policy{}, retry.None().Err())
	// Output:
	// retry: Exponential(0, 1s, 1m0s): the number of attempts includes the first, so it must be at least 1 (1 is None)
	// true <nil>
}
