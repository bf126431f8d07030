// Package saga runs durable sagas: steps run in order, each with a
// compensation, and on a failure the steps that completed are compensated
// in reverse. Progress — the step reached and the saga's data — is written
// to a saga log (memory, or SQL through package sqlstore) after every step,
// so a saga whose process died is resumed, or compensated, by Resume after
// a restart.
//
//	s := saga.New("trip", store.SagaLog(), []saga.Step[Trip]{
//		{Name: "flight", Do: bookFlight, Undo: cancelFlight},
//		{Name: "hotel", Do: bookHotel, Undo: cancelHotel},
//		{Name: "charge", Do: charge},
//	})
//	res, err := s.Run(ctx, tripID, trip)   // Completed, Compensated or Unresolved
//	results, err := s.Resume(ctx)          // at start-up: sagas a dead process left
//
// A compensation that fails does not stop the others; the saga ends
// Unresolved with the failures listed (Saga.Unresolved, WithOnUnresolved):
// nothing is dropped. A step interrupted by a crash runs again on resume, so
// steps and compensations must be idempotent. A saga is not a transaction:
// between a step and its compensation, others see the step's effect.
//
// docs/sagas.md in the repository has the costs and what it does not do.
package saga
