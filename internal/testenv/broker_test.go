package testenv

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCtlCommand(t *testing.T) {
	t.Setenv("ACEMQ_TEST_RABBITMQCTL", "scripts/rabbitmq ctl 4.3")
	argv, err := CtlCommand()
	if err != nil || !slices.Equal(argv, []string{filepath.Join(Root(), "scripts/rabbitmq"), "ctl", "4.3"}) {
		t.Errorf("a relative command: %q, %v; want it from the module's root", argv, err)
	}
	t.Setenv("ACEMQ_TEST_RABBITMQCTL", "/usr/bin/env rabbitmqctl -n rabbit43@localhost")
	if argv, err := CtlCommand(); err != nil || len(argv) != 4 || argv[0] != "/usr/bin/env" {
		t.Errorf("an absolute command: %q, %v", argv, err)
	}
	t.Setenv("ACEMQ_TEST_RABBITMQCTL", "")
	// Another node than the machine's own, with no command for it: never
	// the machine's rabbitmqctl, which would reach the wrong node.
	for _, u := range []string{"amqp://guest:guest@127.0.0.1:5673/", "amqp://rabbit.example:5672/", "amqps://localhost:5671/"} {
		t.Setenv("ACEMQ_TEST_AMQP_URL", u)
		if argv, err := CtlCommand(); err == nil || !strings.Contains(err.Error(), "ACEMQ_TEST_RABBITMQCTL") {
			t.Errorf("%s: %q, %v; want an error asking for ACEMQ_TEST_RABBITMQCTL", u, argv, err)
		}
	}
	for _, u := range []string{"amqp://guest:guest@127.0.0.1:5672/", "amqp://localhost", "amqp://[::1]:5672/"} {
		if !machineDefault(u) {
			t.Errorf("%s is the machine's own node", u)
		}
	}
}

func TestManagementURL(t *testing.T) {
	for in, want := range map[string]string{
		"amqp://guest:guest@127.0.0.1:5672/": "http://guest:guest@127.0.0.1:15672/",
		"amqp://guest:guest@127.0.0.1:5673/": "http://guest:guest@127.0.0.1:15673/",
		"amqp://ops:pw@rabbit/prod":          "http://ops:pw@rabbit:15672/",
		"amqp://[::1]:5674":                  "http://guest:guest@[::1]:15674/",
	} {
		if got, err := managementFor(in); err != nil || got != want {
			t.Errorf("managementFor(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	t.Setenv("ACEMQ_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5673/")
	t.Setenv("ACEMQ_TEST_MANAGEMENT_URL", "")
	if got := ManagementURL(t); got != "http://guest:guest@127.0.0.1:15673/" {
		t.Errorf("ManagementURL from the AMQP URL = %q", got)
	}
	t.Setenv("ACEMQ_TEST_MANAGEMENT_URL", "http://a:b@h:1")
	if got := ManagementURL(t); got != "http://a:b@h:1/" {
		t.Errorf("ManagementURL from ACEMQ_TEST_MANAGEMENT_URL = %q", got)
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{"4.3.6": {4, 3, 6}, "3.10.8": {3, 10, 8}, "4.0": {4, 0, 0}, "4.1.0-rc.1": {4, 1, 0}, "4.2.0+2.g0": {4, 2, 0}} {
		if got, err := ParseVersion(in); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "4", "x.y", "4.x.1", ".3"} {
		if v, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) = %v, want an error", bad, v)
		}
	}
	v := Version{4, 3, 6}
	if !v.AtLeast(4, 3) || !v.AtLeast(3, 10) || v.AtLeast(4, 4) || v.AtLeast(5, 0) || v.String() != "4.3.6" {
		t.Errorf("%v: AtLeast or String is wrong", v)
	}
}

// startFrame is a connection.start frame whose server properties are the
// given table bytes.
func startFrame(table []byte) []byte {
	p := []byte{0, 10, 0, 10, 0, 9}
	p = binary.BigEndian.AppendUint32(p, uint32(len(table)))
	p = append(p, table...)
	p = binary.BigEndian.AppendUint32(p, 5)
	p = append(p, "PLAIN"...)
	f := []byte{1, 0, 0}
	f = binary.BigEndian.AppendUint32(f, uint32(len(p)))
	return append(append(f, p...), 0xCE)
}

func field(key string, typ byte, value []byte) []byte {
	b := append([]byte{byte(len(key))}, key...)
	b = append(b, typ)
	if typ == 'S' || typ == 'F' {
		b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	}
	return append(b, value...)
}

func TestServerVersion(t *testing.T) {
	var table []byte
	table = append(table, field("capabilities", 'F', field("publisher_confirms", 't', []byte{1}))...)
	table = append(table, field("cluster_name", 'S', []byte("rabbit@h"))...)
	table = append(table, field("x", 'l', make([]byte, 8))...)
	table = append(table, field("version", 'S', []byte("4.3.6"))...)
	if v, err := serverVersion(bytes.NewReader(startFrame(table))); err != nil || v != "4.3.6" {
		t.Errorf("serverVersion = %q, %v", v, err)
	}
	for name, frame := range map[string][]byte{
		"no version":     startFrame(field("product", 'S', []byte("RabbitMQ"))),
		"cut short":      startFrame(table)[:20],
		"unknown type":   startFrame(field("a", '?', nil)),
		"table too long": startFrame(append(field("version", 'S', nil)[:9], 0xff, 0xff, 0xff)),
		"huge frame":     {1, 0, 0, 0x7f, 0xff, 0xff, 0xff},
	} {
		if v, err := serverVersion(bytes.NewReader(frame)); err == nil {
			t.Errorf("%s: serverVersion = %q, want an error", name, v)
		}
	}
}

// FuzzServerVersion: the broker's first frame is read as untrusted input,
// at a cost bounded by maxStartFrame.
func FuzzServerVersion(f *testing.F) {
	f.Add(startFrame(field("version", 'S', []byte("4.3.6"))))
	f.Add(startFrame(field("capabilities", 'F', field("a", 'V', nil))))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := serverVersion(bytes.NewReader(b))
		if err == nil && len(v) > len(b) {
			t.Fatalf("a version of %d bytes from %d bytes", len(v), len(b))
		}
	})
}

// TestBrokerVersion asks the broker under test its version.
func TestBrokerVersion(t *testing.T) {
	u := AMQPURL(t)
	v := BrokerVersion(t, u)
	if v.Major < 3 {
		t.Errorf("the broker at %s reports version %v", hostOf(u), v)
	}
	t.Logf("the broker under test is RabbitMQ %v", v)
	// The command that controls the broker under test reaches the same
	// node as the URL.
	if _, err := CtlCommand(); err == nil || InCI() {
		RequireCtl(t)
		out, err := Ctl("eval", `io:format("~s", [rabbit_misc:version()]).`)
		if err != nil {
			t.Fatalf("the broker's rabbitmqctl: %v", err)
		}
		if !strings.HasPrefix(out, v.String()) {
			t.Errorf("rabbitmqctl reaches a node of version %q, the URL one of %v: the command controls another broker", out, v)
		}
	}
}
