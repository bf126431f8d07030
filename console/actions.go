package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/replay"
)

// selection is the body of an action: which of a queue's messages it acts
// on. Exactly one of IDs, Group and All.
type selection struct {
	IDs     []string `json:"ids,omitempty"`
	Group   string   `json:"group,omitempty"`
	All     bool     `json:"all,omitempty"`
	Confirm bool     `json:"confirm,omitempty"` // delete: the operator said yes
}

// maxSelection bounds an action's request body.
const maxSelection = 1 << 20

// readSelection decodes and checks an action's body.
func readSelection(r io.Reader) (selection, error) {
	var s selection
	dec := json.NewDecoder(io.LimitReader(r, maxSelection))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("the request must be one JSON object, {\"ids\": [...]}, {\"group\": \"…\"} or {\"all\": true}: %v", err)
	}
	n := 0
	if len(s.IDs) > 0 {
		n++
	}
	if s.Group != "" {
		n++
	}
	if s.All {
		n++
	}
	if n != 1 {
		return s, errors.New(`say which messages: exactly one of "ids" (a non-empty list), "group" or "all": true`)
	}
	return s, nil
}

// match is the selection as a filter on envelopes.
func (s selection) match() func(acemq.Envelope) bool {
	switch {
	case s.All:
		return func(acemq.Envelope) bool { return true }
	case s.Group != "":
		g := s.Group
		return func(env acemq.Envelope) bool { return groupID(GroupKey(env.Reason())) == g }
	}
	ids := make(map[string]bool, len(s.IDs))
	for _, id := range s.IDs {
		ids[id] = true
	}
	return func(env acemq.Envelope) bool { return ids[env.ID()] }
}

// describe names the selection for an action's message.
func (s selection) describe() string {
	switch {
	case s.All:
		return "every message"
	case s.Group != "":
		return "group " + s.Group
	case len(s.IDs) == 1:
		return "message " + s.IDs[0]
	}
	return fmt.Sprintf("%d selected messages", len(s.IDs))
}

// replayTarget is where a replay from queue sends messages: the queue it
// is the dead-letter half of.
func replayTarget(queue string) (string, bool) { return replay.Target(queue) }

// actionResult is what every action answers.
type actionResult struct {
	Action  string `json:"action"`
	Queue   string `json:"queue"`
	Target  string `json:"target,omitempty"`
	Count   int    `json:"count"`             // moved or deleted
	Skipped int    `json:"skipped,omitempty"` // replay: not selected, put back
	Stopped string `json:"stopped,omitempty"` // replay: why it stopped
	Error   string `json:"error,omitempty"`
	Message string `json:"message"`
}

// replay moves the selected messages from queue back to where they came
// from, through package replay: each is published confirmed before it is
// taken from queue.
func (c *Console) replay(ctx context.Context, queue string, s selection) (actionResult, error) {
	target, ok := replayTarget(queue)
	if !ok {
		return actionResult{}, &requestError{fmt.Sprintf("%q is not a dead-letter (.dlq) or parking (.parked) queue, so it has nowhere to replay to", queue)}
	}
	c.mu.Lock()
	res, err := replay.Run(ctx, c.conn, queue, replay.WithFilter(s.match()))
	c.mu.Unlock()
	if errors.Is(err, acemq.ErrNotFound) && res.Moved == 0 {
		return actionResult{}, err
	}
	out := actionResult{Action: "replay", Queue: queue, Target: target, Count: res.Moved, Skipped: res.Skipped, Stopped: string(res.Reason)}
	out.Message = fmt.Sprintf("Replayed %d %s from %s to %s.", res.Moved, plural(res.Moved), queue, target)
	if err != nil {
		out.Error = err.Error()
		out.Message = fmt.Sprintf("Replayed %d %s from %s to %s, then stopped: %s. Nothing was lost: what was not moved is still on %s.", res.Moved, plural(res.Moved), queue, target, err, queue)
	} else if res.Moved == 0 {
		out.Message = fmt.Sprintf("Replayed nothing: %s holds none of %s any more.", queue, s.describe())
	}
	return out, nil
}

// remove deletes the selected messages from queue for good.
func (c *Console) remove(ctx context.Context, queue string, s selection) (actionResult, error) {
	if !s.Confirm {
		return actionResult{}, &requestError{`deleting messages cannot be undone: send "confirm": true once the operator has agreed`}
	}
	if _, ok := replayTarget(queue); !ok {
		return actionResult{}, &requestError{fmt.Sprintf("%q is not a dead-letter (.dlq) or parking (.parked) queue: the console deletes only dead letters", queue)}
	}
	keep := s.match()
	out := actionResult{Action: "delete", Queue: queue}
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := queues.Browse(ctx, c.conn, queue)
	if err != nil {
		return out, err
	}
	defer b.Close()
	err = each(ctx, b, func(m queues.Message) (bool, error) {
		if !keep(m.Envelope) {
			return true, nil // held, put back when the browser closes
		}
		if err := b.Take(m); err != nil {
			return false, err
		}
		out.Count++
		return true, nil
	})
	if err != nil {
		out.Error = err.Error()
	}
	out.Message = fmt.Sprintf("Deleted %d %s from %s.", out.Count, plural(out.Count), queue)
	if out.Error != "" {
		out.Message = fmt.Sprintf("Deleted %d %s from %s, then stopped: %s.", out.Count, plural(out.Count), queue, out.Error)
	}
	return out, nil
}

// export writes the selected messages of queue, peeked (not taken), as
// JSON lines, each as it is read: it holds one message at a time.
func (c *Console) export(ctx context.Context, w io.Writer, queue string, s selection) (int, error) {
	keep := s.match()
	n := 0
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.look(ctx, queue, func(m acemq.Message[[]byte]) (bool, error) {
		if !keep(m.Envelope) {
			return true, nil
		}
		if err := writeExportLine(w, m); err != nil {
			return false, err
		}
		n++
		return true, nil
	})
	return n, err
}

func plural(n int) string {
	if n == 1 {
		return "message"
	}
	return "messages"
}

// exportName is the file name an export downloads as.
func exportName(queue string) string {
	safe := strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, queue)
	return safe + ".jsonl"
}
