package driver_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/acemq/acemq/driver"
)

func TestPermanent(t *testing.T) {
	if driver.Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
	err := fmt.Errorf("dialling: %w", driver.Permanent(fmt.Errorf("refused: %w", io.EOF)))
	if !errors.Is(err, driver.ErrPermanent) || !errors.Is(err, io.EOF) {
		t.Errorf("%v: want it to match ErrPermanent and keep what it wraps", err)
	}
	if got := err.Error(); got != "dialling: refused: EOF" {
		t.Errorf("text %q: Permanent must not change it", got)
	}
	if errors.Is(fmt.Errorf("x: %w", io.EOF), driver.ErrPermanent) {
		t.Error("an unmarked error matches ErrPermanent")
	}
}
