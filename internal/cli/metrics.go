package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/actuator"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// AddMetricsFlag adds --metrics-addr and --metrics-token.
func AddMetricsFlag(fl *pflag.FlagSet, addr *string) {
	fl.StringVar(addr, "metrics-addr", "", "serve /acemq-metrics, /acemq-health and /acemq-info on this address while running (e.g. "+actuator.DefaultAddr+"; off loopback it needs a token)")
	fl.String("metrics-token", "", "the token every request to --metrics-addr must carry as Authorization: Bearer TOKEN (made up and printed when --metrics-addr is off loopback and none is given)")
}

// metrics serves the actuator endpoints for one command.
type metrics struct {
	act  *actuator.Endpoints
	ln   net.Listener
	stop context.CancelFunc
	done chan error
	// token is what requests must carry (empty: loopback names only);
	// made says it was made up, so it is printed.
	token string
	made  bool
}

// newMetrics opens the listener (so a taken port fails the command before
// it starts) and builds the actuator; nil when addr is empty. Its
// ConnectOptions record the connection's metrics through the actuator.
func newMetrics(cmd *cobra.Command, addr string) (*metrics, error) {
	if addr == "" {
		return nil, nil
	}
	token, _ := cmd.Flags().GetString("metrics-token")
	made := false
	if token == "" && !actuator.IsLoopback(addr) {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		token, made = hex.EncodeToString(b[:]), true
	}
	act, err := actuator.New(actuator.WithApplication("acemq "+cmd.Name(), actuator.LibraryVersion()), actuator.WithToken(token))
	if err != nil {
		return nil, WithCode(ExitFailure, fmt.Errorf("setting up metrics: %w", err))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, WithCode(ExitFailure, fmt.Errorf("--metrics-addr %s: %w", addr, err))
	}
	return &metrics{act: act, ln: ln, token: token, made: made}, nil
}

// connectOptions record a connection's metrics through the actuator.
func (m *metrics) connectOptions() []acemq.ConnOption {
	if m == nil {
		return nil
	}
	return []acemq.ConnOption{acemq.WithMeterProvider(m.act.MeterProvider())}
}

// start watches conn and serves the endpoints until close.
func (m *metrics) start(cmd *cobra.Command, conn *acemq.Conn) {
	if m == nil {
		return
	}
	m.act.Watch(conn)
	ctx, cancel := context.WithCancel(context.Background())
	m.stop, m.done = cancel, make(chan error, 1)
	go func() { m.done <- actuator.Serve(ctx, m.ln, m.act) }()
	fmt.Fprintf(cmd.ErrOrStderr(), "metrics on http://%s%s (health %s, info %s)\n", m.ln.Addr(), actuator.PathMetrics, actuator.PathHealth, actuator.PathInfo)
	if m.made {
		fmt.Fprintf(cmd.ErrOrStderr(), "metrics need the header: Authorization: Bearer %s\n", m.token)
	}
}

// close stops serving (or just closes the listener when never started).
func (m *metrics) close() {
	if m == nil {
		return
	}
	if m.stop == nil {
		_ = m.ln.Close()
		return
	}
	m.stop()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.act.Shutdown(ctx)
}
