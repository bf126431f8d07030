package saga_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/acemq/acemq/saga"
)

type Trip struct {
	Flight, Hotel string
}

// The card is declined at the last step: the hotel and the flight are
// cancelled, last first. With sqlstore's SagaLog instead of the memory
// log, a process that dies half-way is finished by Resume after its
// restart.
func Example() {
	ctx := context.Background()
	step := func(what string, fail bool) func(context.Context, *Trip) error {
		return func(context.Context, *Trip) error {
			fmt.Println(what)
			if fail {
				return errors.New("card declined")
			}
			return nil
		}
	}
	s := saga.New("trip", saga.NewMemoryLog(), []saga.Step[Trip]{
		{Name: "flight", Do: step("book flight", false), Undo: step("cancel flight", false)},
		{Name: "hotel", Do: step("book hotel", false), Undo: step("cancel hotel", false)},
		{Name: "charge", Do: step("charge card", true)},
	})
	res, err := s.Run(ctx, "trip-42", Trip{})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.State, "because", res.Err)
	// Output:
	// book flight
	// book hotel
	// charge card
	// cancel hotel
	// cancel flight
	// compensated because saga "trip": step charge of "trip-42" failed: card declined
}
