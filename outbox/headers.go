package outbox

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/acemq/acemq/driver"
)

// A stored record keeps every header with its AMQP type (docs/wire.md §13
// #38): an int32 comes back an int32, a []byte a []byte, a timestamp a
// time.Time. Plain JSON cannot do that (every number would come back a
// float64 and go out as an AMQP double), so headers are stored as JSON in
// which every value is tagged with its type:
//
//	{"x-tenant": {"t": "int32", "v": "42"}, "tags": {"t": "array", "v": [...]}}
//
// Numbers are written as strings so that no JSON reader rounds them, and
// floats use Go's shortest round-trip form ("NaN" and "+Inf" included).

// The type tags of the stored form.
const (
	tagVoid    = "void"
	tagString  = "string"
	tagBytes   = "bytes"
	tagBool    = "bool"
	tagInt8    = "int8"
	tagInt16   = "int16"
	tagInt32   = "int32"
	tagInt64   = "int64"
	tagUint8   = "uint8"
	tagUint16  = "uint16"
	tagUint32  = "uint32"
	tagFloat32 = "float32"
	tagFloat64 = "float64"
	tagTime    = "timestamp"
	tagDecimal = "decimal"
	tagArray   = "array"
	tagTable   = "table"
)

// maxDepth bounds the nesting of stored tables and arrays, as a guard
// against a crafted row exhausting the stack.
const maxDepth = 64

type tagged struct {
	T string          `json:"t"`
	V json.RawMessage `json:"v,omitempty"`
}

// MarshalHeaders encodes an AMQP header table in the typed JSON form the
// SQL stores keep. It fails on a value an AMQP field table cannot hold.
func MarshalHeaders(h driver.Table) ([]byte, error) {
	if len(h) == 0 {
		return []byte("{}"), nil
	}
	var buf bytes.Buffer
	if err := writeTable(&buf, h, 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeTable(buf *bytes.Buffer, h driver.Table, depth int) error {
	if depth > maxDepth {
		return errors.New("outbox: headers nest deeper than 64 levels")
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	buf.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		if err := writeValue(buf, h[k], depth); err != nil {
			return fmt.Errorf("header %q: %w", k, err)
		}
	}
	buf.WriteByte('}')
	return nil
}

func writeTagged(buf *bytes.Buffer, tag string, v string) {
	buf.WriteString(`{"t":"`)
	buf.WriteString(tag)
	buf.WriteString(`","v":`)
	b, _ := json.Marshal(v)
	buf.Write(b)
	buf.WriteByte('}')
}

func writeValue(buf *bytes.Buffer, v any, depth int) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString(`{"t":"void"}`)
	case string:
		writeTagged(buf, tagString, x)
	case []byte:
		writeTagged(buf, tagBytes, base64.StdEncoding.EncodeToString(x))
	case bool:
		writeTagged(buf, tagBool, strconv.FormatBool(x))
	case int8:
		writeTagged(buf, tagInt8, strconv.FormatInt(int64(x), 10))
	case int16:
		writeTagged(buf, tagInt16, strconv.FormatInt(int64(x), 10))
	case int32:
		writeTagged(buf, tagInt32, strconv.FormatInt(int64(x), 10))
	case int64:
		writeTagged(buf, tagInt64, strconv.FormatInt(x, 10))
	case int:
		writeTagged(buf, tagInt64, strconv.FormatInt(int64(x), 10))
	case uint8:
		writeTagged(buf, tagUint8, strconv.FormatUint(uint64(x), 10))
	case uint16:
		writeTagged(buf, tagUint16, strconv.FormatUint(uint64(x), 10))
	case uint32:
		writeTagged(buf, tagUint32, strconv.FormatUint(uint64(x), 10))
	case float32:
		writeTagged(buf, tagFloat32, strconv.FormatFloat(float64(x), 'g', -1, 32))
	case float64:
		writeTagged(buf, tagFloat64, strconv.FormatFloat(x, 'g', -1, 64))
	case time.Time:
		writeTagged(buf, tagTime, x.UTC().Format(time.RFC3339Nano))
	case driver.Decimal:
		writeTagged(buf, tagDecimal, strconv.Itoa(int(x.Scale))+":"+strconv.FormatInt(int64(x.Value), 10))
	case []any:
		if depth >= maxDepth {
			return errors.New("outbox: headers nest deeper than 64 levels")
		}
		buf.WriteString(`{"t":"array","v":[`)
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeValue(buf, e, depth+1); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		buf.WriteString(`]}`)
	case map[string]any:
		buf.WriteString(`{"t":"table","v":`)
		if err := writeTable(buf, x, depth+1); err != nil {
			return err
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("outbox: a %T cannot be stored as an AMQP header value", v)
	}
	return nil
}

// UnmarshalHeaders decodes what MarshalHeaders wrote, every value with its
// AMQP type. It is a reader of stored rows, so it refuses anything
// malformed with an error rather than guessing.
func UnmarshalHeaders(b []byte) (driver.Table, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("outbox: stored headers are not a JSON object: %w", err)
	}
	if raw == nil {
		return nil, errors.New("outbox: stored headers are null, not a JSON object")
	}
	return readTable(raw, 0)
}

func readTable(raw map[string]json.RawMessage, depth int) (driver.Table, error) {
	if depth > maxDepth {
		return nil, errors.New("outbox: stored headers nest deeper than 64 levels")
	}
	if len(raw) == 0 {
		return nil, nil
	}
	out := make(driver.Table, len(raw))
	for k, r := range raw {
		v, err := readValue(r, depth)
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

func readValue(r json.RawMessage, depth int) (any, error) {
	var tv tagged
	if err := json.Unmarshal(r, &tv); err != nil {
		return nil, fmt.Errorf("outbox: a stored header value is not a tagged value: %w", err)
	}
	switch tv.T {
	case tagVoid:
		return nil, nil
	case tagArray:
		if depth >= maxDepth {
			return nil, errors.New("outbox: stored headers nest deeper than 64 levels")
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(tv.V, &elems); err != nil {
			return nil, fmt.Errorf("outbox: a stored array is malformed: %w", err)
		}
		out := make([]any, len(elems))
		for i, e := range elems {
			v, err := readValue(e, depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = v
		}
		return out, nil
	case tagTable:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(tv.V, &m); err != nil || m == nil {
			return nil, fmt.Errorf("outbox: a stored table is malformed: %v", err)
		}
		t, err := readTable(m, depth+1)
		if t == nil && err == nil {
			t = driver.Table{}
		}
		return t, err
	}
	var s string
	if err := json.Unmarshal(tv.V, &s); err != nil {
		return nil, fmt.Errorf("outbox: a stored %q value is not a string: %w", tv.T, err)
	}
	switch tv.T {
	case tagString:
		return s, nil
	case tagBytes:
		return base64.StdEncoding.DecodeString(s)
	case tagBool:
		return strconv.ParseBool(s)
	case tagInt8:
		n, err := strconv.ParseInt(s, 10, 8)
		return int8(n), err
	case tagInt16:
		n, err := strconv.ParseInt(s, 10, 16)
		return int16(n), err
	case tagInt32:
		n, err := strconv.ParseInt(s, 10, 32)
		return int32(n), err
	case tagInt64:
		return strconv.ParseInt(s, 10, 64)
	case tagUint8:
		n, err := strconv.ParseUint(s, 10, 8)
		return uint8(n), err
	case tagUint16:
		n, err := strconv.ParseUint(s, 10, 16)
		return uint16(n), err
	case tagUint32:
		n, err := strconv.ParseUint(s, 10, 32)
		return uint32(n), err
	case tagFloat32:
		f, err := strconv.ParseFloat(s, 32)
		return float32(f), err
	case tagFloat64:
		return strconv.ParseFloat(s, 64)
	case tagTime:
		return time.Parse(time.RFC3339Nano, s)
	case tagDecimal:
		var scale uint8
		var value int64
		i := bytes.IndexByte([]byte(s), ':')
		if i < 0 {
			return nil, fmt.Errorf("outbox: a stored decimal %q is not scale:value", s)
		}
		sc, err := strconv.ParseUint(s[:i], 10, 8)
		if err != nil {
			return nil, fmt.Errorf("outbox: a stored decimal's scale: %w", err)
		}
		value, err = strconv.ParseInt(s[i+1:], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("outbox: a stored decimal's value: %w", err)
		}
		scale = uint8(sc)
		return driver.Decimal{Scale: scale, Value: int32(value)}, nil
	}
	return nil, fmt.Errorf("outbox: unknown stored header type %q", tv.T)
}
