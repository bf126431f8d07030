package route

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Stop is one stop of a JSON routing slip: where to publish (Exchange and
// RoutingKey), an optional name, and, once done, when it completed.
type Stop struct {
	Exchange   string
	RoutingKey string
	// Name is optional; it is omitted from the JSON when empty.
	Name string
	// CompletedAt is set on the stops in Slip.Done only.
	CompletedAt time.Time
}

// label is how metrics name the stop: its name, else its routing key.
func (s Stop) label() string {
	if s.Name != "" {
		return s.Name
	}
	return s.RoutingKey
}

// Slip is the JSON routing slip carried in the acemq-routing-slip header
// (docs/wire.md §3.3, §9.1): the stops still to run, the first being the one the
// message is addressed to, and the stops done. The slip, not any declared
// pipeline, decides where a message goes next. It carries no run id.
type Slip struct {
	Steps []Stop
	Done  []Stop
}

// NewSlip returns a slip whose steps are stops, none done.
func NewSlip(stops ...Stop) Slip {
	return Slip{Steps: append([]Stop(nil), stops...)}
}

// Current is the stop the message is addressed to; ok is false when the
// slip has no steps left (the run is finished).
func (s Slip) Current() (Stop, bool) {
	if len(s.Steps) == 0 {
		return Stop{}, false
	}
	return s.Steps[0], true
}

// Finished reports whether no steps are left.
func (s Slip) Finished() bool { return len(s.Steps) == 0 }

// Advance returns a copy with the current stop moved to Done, stamped with
// at (in UTC, to the second). A finished slip is returned unchanged.
func (s Slip) Advance(at time.Time) Slip {
	if len(s.Steps) == 0 {
		return s.clone()
	}
	done := s.Steps[0]
	done.CompletedAt = at.UTC().Truncate(time.Second)
	n := Slip{
		Steps: append([]Stop(nil), s.Steps[1:]...),
		Done:  append(append(make([]Stop, 0, len(s.Done)+1), s.Done...), done),
	}
	return n
}

func (s Slip) clone() Slip {
	return Slip{Steps: append([]Stop(nil), s.Steps...), Done: append([]Stop(nil), s.Done...)}
}

// MarshalJSON writes the family's exact form: compact, "steps" then "done",
// each stop's "exchange", "routingKey", "name", "completedAt" in that order;
// "name" omitted when empty, "done" omitted while empty, "completedAt" only
// on done stops, in UTC to the second with a Z.
func (s Slip) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"steps":[`)
	for i, st := range s.Steps {
		if i > 0 {
			b.WriteByte(',')
		}
		writeStop(&b, st, false)
	}
	b.WriteByte(']')
	if len(s.Done) > 0 {
		b.WriteString(`,"done":[`)
		for i, st := range s.Done {
			if i > 0 {
				b.WriteByte(',')
			}
			writeStop(&b, st, true)
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// String is the slip's JSON, as written to the header.
func (s Slip) String() string {
	b, _ := s.MarshalJSON()
	return string(b)
}

func writeStop(b *bytes.Buffer, st Stop, done bool) {
	b.WriteString(`{"exchange":`)
	writeString(b, st.Exchange)
	b.WriteString(`,"routingKey":`)
	writeString(b, st.RoutingKey)
	if st.Name != "" {
		b.WriteString(`,"name":`)
		writeString(b, st.Name)
	}
	if done && !st.CompletedAt.IsZero() {
		b.WriteString(`,"completedAt":"`)
		b.WriteString(st.CompletedAt.UTC().Format(completedLayout))
		b.WriteByte('"')
	}
	b.WriteByte('}')
}

// completedLayout is how completedAt is written: UTC, seconds, Z.
const completedLayout = "2006-01-02T15:04:05Z"

// writeString writes s as a JSON string without escaping <, > and & (as
// Jackson, Ruby and the other writers of the family do).
func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Truncate(b.Len() - 1) // Encode's newline
}

type slipJSON struct {
	Steps *[]stopJSON `json:"steps"`
	Done  []stopJSON  `json:"done"`
}

type stopJSON struct {
	Exchange    string `json:"exchange"`
	RoutingKey  string `json:"routingKey"`
	Name        string `json:"name"`
	CompletedAt string `json:"completedAt"`
}

// ErrInvalidSlip is wrapped by ParseSlip's errors.
var ErrInvalidSlip = errors.New("the routing slip is not valid")

// ParseSlip reads a routing slip. It does not depend on key order or
// whitespace, ignores fields it does not know, and reads completedAt as
// RFC 3339 with or without fractional seconds, with Z or an offset (Python
// writes microseconds and +00:00), or without a zone (taken as UTC). A
// missing or null "steps", a value of the wrong type or an unreadable time
// fails with an error wrapping ErrInvalidSlip.
func ParseSlip(data []byte) (Slip, error) {
	var raw slipJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return Slip{}, fmt.Errorf("%w: %v", ErrInvalidSlip, err)
	}
	if raw.Steps == nil {
		return Slip{}, fmt.Errorf(`%w: it has no "steps" array`, ErrInvalidSlip)
	}
	var s Slip
	for _, st := range *raw.Steps {
		s.Steps = append(s.Steps, Stop{Exchange: st.Exchange, RoutingKey: st.RoutingKey, Name: st.Name})
	}
	for i, st := range raw.Done {
		stop := Stop{Exchange: st.Exchange, RoutingKey: st.RoutingKey, Name: st.Name}
		if st.CompletedAt != "" {
			t, err := parseTime(st.CompletedAt)
			if err != nil {
				return Slip{}, fmt.Errorf("%w: done[%d].completedAt %q is not an RFC 3339 time", ErrInvalidSlip, i, st.CompletedAt)
			}
			stop.CompletedAt = t
		}
		s.Done = append(s.Done, stop)
	}
	return s, nil
}

// UnmarshalJSON reads a slip as ParseSlip does.
func (s *Slip) UnmarshalJSON(data []byte) error {
	p, err := ParseSlip(data)
	if err != nil {
		return err
	}
	*s = p
	return nil
}

var timeLayouts = []string{
	time.RFC3339Nano,                // Z or ±hh:mm, any fraction
	"2006-01-02T15:04:05.999999999", // no zone: UTC
}

func parseTime(v string) (time.Time, error) {
	var firstErr error
	for _, layout := range timeLayouts {
		t, err := time.Parse(layout, v)
		if err == nil {
			t = t.UTC()
			if t.Year() < 0 || t.Year() > 9999 {
				return time.Time{}, errors.New("year out of range")
			}
			return t, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return time.Time{}, firstErr
}
