// Package credentials provides the user name and password a connection
// authenticates with, read afresh on every connection and reconnection so
// that a rotated secret is picked up at the next reconnect:
//
//	conn, err := acemq.Connect(ctx, "amqps://broker.internal/orders",
//		acemq.WithCredentials(credentials.FromFile("/run/secrets/rabbitmq")))
//
// A Provider is a function type: any function of its shape is one, with no
// adapter, for a secret store of your own. The package depends on package
// driver only, so that package acemq can name its Provider.
package credentials

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/acemq/acemq/driver"
)

// Provider returns the user name and password to connect with.
// acemq.WithCredentials consults it on every connection and reconnection,
// so a rotated secret is picked up at the next reconnect. Any function of
// this shape is one.
type Provider func(ctx context.Context) (driver.Credentials, error)

// FromEnv reads the user name and password from two environment variables
// on every connection and reconnection. An unset or empty variable is an
// error that names the variable (never its value).
func FromEnv(userVar, passwordVar string) Provider {
	return func(context.Context) (driver.Credentials, error) {
		u, p := os.Getenv(userVar), os.Getenv(passwordVar)
		switch {
		case u == "":
			return driver.Credentials{}, fmt.Errorf("credentials: the environment variable %s (the broker user name) is not set", userVar)
		case p == "":
			return driver.Credentials{}, fmt.Errorf("credentials: the environment variable %s (the broker password) is not set", passwordVar)
		}
		return driver.Credentials{Username: u, Password: p}, nil
	}
}

// FromFile reads the user name and password from a file on every
// connection and reconnection: the first line is the user name
// (surrounding white space trimmed), the second the password (trailing
// spaces and tabs trimmed); lines may end in \n or \r\n. This suits
// secrets mounted as files, which are rotated in place.
func FromFile(path string) Provider {
	return func(context.Context) (driver.Credentials, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return driver.Credentials{}, fmt.Errorf("credentials: reading the broker user name and password: %w", err)
		}
		lines := strings.SplitN(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n", 3)
		if len(lines) < 2 || strings.TrimSpace(lines[0]) == "" || strings.TrimRight(lines[1], " \t") == "" {
			return driver.Credentials{}, fmt.Errorf("credentials: the credentials file %s must hold the user name on its first line and the password on its second", path)
		}
		return driver.Credentials{Username: strings.TrimSpace(lines[0]), Password: strings.TrimRight(lines[1], " \t")}, nil
	}
}
