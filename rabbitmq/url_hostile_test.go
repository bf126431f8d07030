package rabbitmq

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq/driver"
)

// The driver refuses a URL whose password holds a character the URL
// gives a meaning to, naming the problem, and its error holds no part of
// the user information (acemq.Connect's test covers more classes).
func TestMalformedURLHidesThePassword(t *testing.T) {
	for class, pw := range map[string]string{
		"slash": "Qz7/Wk9vXj", "hash": "Qz7#Wk9vXj", "question mark": "Qz7?Wk9vXj", "bad escape": "Qz7%zzWk9vXj",
		"space": "Qz7 Wk9vXj", "non-ASCII": "Qz7üWk9vXj", "control": "Qz7\rWk9vXj", "slash then at": "Qz7/Wk@9vXj",
	} {
		for _, raw := range []string{"amqp://alice:" + pw + "@127.0.0.1:1/", "amqps://alice:" + pw + "@127.0.0.1:1/prod"} {
			_, err := open(context.Background(), driver.Config{URLs: []string{"amqp://guest:guest@127.0.0.1:1/", raw}})
			if !errors.Is(err, driver.ErrMalformedURL) || !strings.Contains(err.Error(), "xxxxx@127.0.0.1:1/") {
				t.Errorf("%s: %v, want a malformed URL with its user information masked", class, err)
				continue
			}
			for i := 0; i+3 <= len(pw); i++ {
				if strings.Contains(err.Error(), pw[i:i+3]) || strings.Contains(err.Error(), "alice") {
					t.Errorf("%s: the error quotes the user information: %v", class, err)
					break
				}
			}
			if _, err := (&conn{}).dial(context.Background(), raw, 0); !errors.Is(err, driver.ErrMalformedURL) {
				t.Errorf("%s: dial: %v", class, err)
			}
		}
	}
}
