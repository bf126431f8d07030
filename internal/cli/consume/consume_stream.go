package consume

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/stream"
	"github.com/spf13/cobra"
)

// streamIdle is how long consume --offset without --count waits for the
// next message before it decides the stream has nothing more for now.
const streamIdle = time.Second

// runConsumeStream is consume --offset: a stream reader from the offset,
// printing every message until --count came, the stream went idle, or
// --timeout passed.
func runConsumeStream(cmd *cobra.Command, f Options) error {
	if f.requeue {
		return cli.WithCode(cli.ExitFailure, errors.New("--requeue does not apply with --offset: reading a stream never removes messages, so there is nothing to put back"))
	}
	start, err := stream.ParseOffset(f.offset)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--offset: %w", err))
	}
	keys, err := cli.LoadKeyring(f.keyring)
	if err != nil {
		return err
	}
	s, err := cli.OpenSession(cmd, "")
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()

	out := cmd.OutOrStdout()
	var mu sync.Mutex
	read, unopened := 0, 0
	var printErr error
	got := make(chan struct{}, 1)
	full := make(chan struct{})
	r, err := stream.Read(ctx, s.Conn, f.queue, func(_ context.Context, m acemq.Message[[]byte]) acemq.Ack {
		mu.Lock()
		defer mu.Unlock()
		if printErr != nil || (f.count > 0 && read >= f.count) {
			return acemq.Accept()
		}
		read++
		o := cli.OpenBody(keys, m)
		if perr := PrintMessage(out, read, m, f.json, o); perr != nil {
			printErr = perr
		}
		if o.Failed() {
			unopened++ // it stays in the stream, as everything does
			cli.ReportUnopened(cmd.ErrOrStderr(), read, m, o, "it stays in the stream "+f.queue)
		}
		if f.count > 0 && read == f.count {
			close(full)
		}
		select {
		case got <- struct{}{}:
		default:
		}
		return acemq.Accept()
	}, stream.WithOffset(start), stream.WithCodec(acemq.Bytes), stream.WithDeclarations(false))
	if errors.Is(err, acemq.ErrNotFound) {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("stream %q does not exist%s", f.queue, s.Hint()))
	}
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	idle := time.NewTimer(streamIdle)
	defer idle.Stop()
wait:
	for {
		select {
		case <-full:
			break wait
		case <-got:
			if f.count == 0 {
				idle.Reset(streamIdle)
			}
		case <-idle.C:
			if f.count == 0 {
				break wait
			}
		case <-ctx.Done():
			break wait
		case <-r.Done():
			break wait
		}
	}
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 10*time.Second)
	defer ccancel()
	_ = r.Close(cctx)
	mu.Lock()
	defer mu.Unlock()
	if printErr != nil {
		return cli.WithCode(cli.ExitFailure, printErr)
	}
	if !f.json {
		fmt.Fprintf(cmd.ErrOrStderr(), "read %d message(s) from the stream %s, from %s\n", read, f.queue, start)
	}
	if cmd.Context().Err() != nil {
		return cli.WithCode(cli.ExitFailure, errors.New("interrupted"))
	}
	if unopened > 0 {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("%d of %d message(s) could not be opened with the keyring %s", unopened, read, f.keyring))
	}
	if f.count > 0 && read < f.count {
		return cli.WithCode(cli.ExitTimeout, fmt.Errorf("timed out after %s: read %d of %d messages from the stream %s", f.timeout, read, f.count, f.queue))
	}
	return nil
}
