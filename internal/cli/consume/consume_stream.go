package consume

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec/encrypted"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/stream"
)

// streamIdle is how long consume --offset without --count waits for the
// next message before it decides the stream has nothing more for now.
const streamIdle = time.Second

// runStream is consume --offset: a stream reader from the offset,
// printing every message until --count came, the stream went idle, or
// --timeout passed.
func (f *Options) runStream() error {
	cmd := f.Cmd
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
	p := &streamPrinter{f: f, keys: keys, got: make(chan struct{}, 1), full: make(chan struct{})}
	r, err := stream.Read(ctx, s.Conn, f.queue, p.print, stream.WithOffset(f.start), stream.WithCodec(acemq.Bytes), stream.WithDeclarations(false))
	if errors.Is(err, acemq.ErrNotFound) {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("stream %q does not exist%s", f.queue, s.Hint()))
	}
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	p.wait(ctx, r.Done())
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 10*time.Second)
	defer ccancel()
	_ = r.Close(cctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	return f.streamOutcome(p)
}

// streamPrinter prints what a stream reader delivers.
type streamPrinter struct {
	f    *Options
	keys *encrypted.Codec
	got  chan struct{} // a message came
	full chan struct{} // closed when --count came

	mu       sync.Mutex
	read     int
	unopened int
	printErr error
}

// print is the stream reader's handler.
func (p *streamPrinter) print(_ context.Context, m acemq.Message[[]byte]) acemq.Ack {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.f
	if p.printErr != nil || (f.count > 0 && p.read >= f.count) {
		return acemq.Accept()
	}
	p.read++
	o := cli.OpenBody(p.keys, m)
	if perr := PrintMessage(f.Cmd.OutOrStdout(), p.read, m, f.json, o); perr != nil {
		p.printErr = perr
	}
	if o.Failed() {
		p.unopened++ // it stays in the stream, as everything does
		cli.ReportUnopened(f.Cmd.ErrOrStderr(), p.read, m, o, "it stays in the stream "+f.queue)
	}
	if f.count > 0 && p.read == f.count {
		close(p.full)
	}
	select {
	case p.got <- struct{}{}:
	default:
	}
	return acemq.Accept()
}

// wait returns when --count came, when (without --count) no message came
// for streamIdle, or when ctx or the reader ends.
func (p *streamPrinter) wait(ctx context.Context, done <-chan struct{}) {
	idle := time.NewTimer(streamIdle)
	defer idle.Stop()
	for {
		select {
		case <-p.full:
			return
		case <-p.got:
			if p.f.count == 0 {
				idle.Reset(streamIdle)
			}
		case <-idle.C:
			if p.f.count == 0 {
				return
			}
		case <-ctx.Done():
			return
		case <-done:
			return
		}
	}
}

// streamOutcome is the command's result once the read is over.
func (f *Options) streamOutcome(p *streamPrinter) error {
	cmd := f.Cmd
	if p.printErr != nil {
		return cli.WithCode(cli.ExitFailure, p.printErr)
	}
	if !f.json {
		fmt.Fprintf(cmd.ErrOrStderr(), "read %d message(s) from the stream %s, from %s\n", p.read, f.queue, f.start)
	}
	if cmd.Context().Err() != nil {
		return cli.WithCode(cli.ExitFailure, errors.New("interrupted"))
	}
	if p.unopened > 0 {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("%d of %d message(s) could not be opened with the keyring %s", p.unopened, p.read, f.keyring))
	}
	if f.count > 0 && p.read < f.count {
		return cli.WithCode(cli.ExitTimeout, fmt.Errorf("timed out after %s: read %d of %d messages from the stream %s", f.timeout, p.read, f.count, f.queue))
	}
	return nil
}
