package testenv

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The broker under test is the RabbitMQ node at ACEMQ_TEST_AMQP_URL. Tests
// that control it (close connections, stop its application, raise an
// alarm) or read its management API go through the helpers below, so that
// they reach that node and never whichever node the machine's own
// rabbitmqctl finds:
//
//   - ACEMQ_TEST_RABBITMQCTL is the command that runs rabbitmqctl against
//     the node, as a command prefix split at spaces (for a 4.x node of
//     scripts/rabbitmq: "scripts/rabbitmq ctl 4.3"; a relative path is
//     taken from the module's root). Unset, it is the machine's own
//     rabbitmqctl, but only when the URL names the machine's default node
//     (port 5672 on the loopback interface): for any other URL a test that
//     needs it skips, or fails in CI.
//   - ACEMQ_TEST_MANAGEMENT_URL is the node's management API
//     (http://user:pass@host:port/). Unset, it is the URL's host and
//     credentials on the AMQP port plus 10000 (5672 → 15672, and
//     scripts/rabbitmq's 5673 → 15673).

// CtlCommand returns the command, program and leading arguments, that runs
// rabbitmqctl against the broker under test, or an error saying why none
// is known (see the package's notes on ACEMQ_TEST_RABBITMQCTL).
func CtlCommand() ([]string, error) {
	if v := strings.TrimSpace(os.Getenv("ACEMQ_TEST_RABBITMQCTL")); v != "" {
		argv := strings.Fields(v)
		if strings.Contains(argv[0], "/") && !filepath.IsAbs(argv[0]) {
			argv[0] = filepath.Join(Root(), argv[0])
		}
		return argv, nil
	}
	raw := strings.TrimSpace(os.Getenv("ACEMQ_TEST_AMQP_URL"))
	if raw != "" && !machineDefault(raw) {
		return nil, fmt.Errorf("ACEMQ_TEST_AMQP_URL names %s, not the machine's own node on 127.0.0.1:5672: set ACEMQ_TEST_RABBITMQCTL to a command running rabbitmqctl against it (such as scripts/rabbitmq ctl 4.3)", hostOf(raw))
	}
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		return nil, fmt.Errorf("rabbitmqctl is not on PATH (%v) and ACEMQ_TEST_RABBITMQCTL is not set", err)
	}
	return []string{"rabbitmqctl"}, nil
}

// machineDefault reports whether the AMQP URL raw names the machine's own
// node: port 5672 (or none) on a loopback host.
func machineDefault(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	if p := u.Port(); p != "" && p != "5672" {
		return false
	}
	switch h := u.Hostname(); h {
	case "localhost", "":
		return true
	default:
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return "an unparsable URL"
}

// RequireCtl skips the test, or fails it in CI, when no command controls
// the broker under test (CtlCommand).
func RequireCtl(t testing.TB) {
	t.Helper()
	if _, err := CtlCommand(); err != nil {
		if InCI() {
			t.Fatalf("the test controls the broker under test: %v", err)
		}
		t.Skipf("the test controls the broker under test: %v", err)
	}
}

// Ctl runs rabbitmqctl args against the broker under test (CtlCommand),
// within 90 s, and returns its combined output. The error names the
// command and carries the output.
func Ctl(args ...string) (string, error) {
	argv, err := CtlCommand()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv = append(argv, args...)
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out), nil
}

// ManagementURL returns the management API of the broker under test
// (http://user:pass@host:port/, ending in a slash): ACEMQ_TEST_MANAGEMENT_URL,
// or one made from ACEMQ_TEST_AMQP_URL (see the package's notes). It skips
// the test, or fails it in CI, like AMQPURL.
func ManagementURL(t testing.TB) string {
	t.Helper()
	if v := strings.TrimSpace(os.Getenv("ACEMQ_TEST_MANAGEMENT_URL")); v != "" {
		if !strings.HasSuffix(v, "/") {
			v += "/"
		}
		return v
	}
	m, err := managementFor(AMQPURL(t))
	if err != nil {
		t.Fatalf("ACEMQ_TEST_AMQP_URL: %v", err)
	}
	return m
}

// managementFor is the management URL conventionally beside the AMQP URL
// raw: its host and credentials (guest/guest when it has none), port 15672
// for 5672 or none, else the AMQP port plus 10000.
func managementFor(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	port := 5672
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return "", fmt.Errorf("the port of %s: %v", u.Host, err)
		}
	}
	host := u.Hostname()
	if host == "" {
		host = "localhost"
	}
	m := url.URL{Scheme: "http", Host: net.JoinHostPort(host, strconv.Itoa(port+10000)), Path: "/"}
	if u.User != nil {
		m.User = u.User
	} else {
		m.User = url.UserPassword("guest", "guest")
	}
	return m.String(), nil
}

// Version is a RabbitMQ version, as a broker reports it.
type Version struct {
	Major, Minor, Patch int
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v is major.minor or later.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

var versions sync.Map // AMQP URL → Version

// BrokerVersion returns the version of the RabbitMQ node at the AMQP URL
// raw, from the server properties it sends when a client connects (asked
// once per URL and test binary). A test whose assertions differ between
// versions of the broker uses it to say which holds where; it fails the
// test when the node cannot be asked.
func BrokerVersion(t testing.TB, raw string) Version {
	t.Helper()
	if v, ok := versions.Load(raw); ok {
		return v.(Version)
	}
	v, err := brokerVersion(raw)
	if err != nil {
		t.Fatalf("asking the broker at %s its version: %v", hostOf(raw), err)
	}
	versions.Store(raw, v)
	return v
}

func brokerVersion(raw string) (Version, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Version{}, err
	}
	port := u.Port()
	if port == "" {
		port = "5672"
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(u.Hostname(), port), 10*time.Second)
	if err != nil {
		return Version{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("AMQP\x00\x00\x09\x01")); err != nil {
		return Version{}, err
	}
	s, err := serverVersion(bufio.NewReader(c))
	if err != nil {
		return Version{}, err
	}
	return ParseVersion(s)
}

// ParseVersion reads a version such as "4.3.6" or "3.10.8"; anything after
// the third number (a pre-release or build suffix) is ignored.
func ParseVersion(s string) (Version, error) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return Version{}, fmt.Errorf("version %q: want major.minor[.patch]", s)
	}
	var nums [3]int
	for i, p := range parts {
		end := strings.IndexFunc(p, func(r rune) bool { return r < '0' || r > '9' })
		if end == 0 {
			return Version{}, fmt.Errorf("version %q: want major.minor[.patch]", s)
		}
		if end > 0 {
			p = p[:end]
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return Version{}, fmt.Errorf("version %q: %v", s, err)
		}
		nums[i] = n
	}
	return Version{nums[0], nums[1], nums[2]}, nil
}

// maxStartFrame bounds the connection.start frame read from the broker.
const maxStartFrame = 64 << 10

// serverVersion reads the connection.start frame of AMQP 0-9-1 from r and
// returns its server property "version".
func serverVersion(r io.Reader) (string, error) {
	var hdr [7]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", fmt.Errorf("reading the broker's first frame: %w", err)
	}
	if hdr[0] != 1 {
		return "", fmt.Errorf("the broker's first frame is of type %d, not a method", hdr[0])
	}
	size := binary.BigEndian.Uint32(hdr[3:])
	if size > maxStartFrame {
		return "", fmt.Errorf("the broker's first frame is %d bytes", size)
	}
	p := make([]byte, size)
	if _, err := io.ReadFull(r, p); err != nil {
		return "", fmt.Errorf("reading the broker's first frame: %w", err)
	}
	// class 10 (connection), method 10 (start), version-major, version-minor,
	// then the server properties, a field table.
	if len(p) < 10 || binary.BigEndian.Uint16(p) != 10 || binary.BigEndian.Uint16(p[2:]) != 10 {
		return "", errors.New("the broker's first frame is not connection.start")
	}
	n := binary.BigEndian.Uint32(p[6:])
	table := p[10:]
	if uint64(n) > uint64(len(table)) {
		return "", errors.New("connection.start's server properties are cut short")
	}
	table = table[:n]
	for len(table) > 0 {
		kl := int(table[0])
		if len(table) < 1+kl+1 {
			return "", errors.New("connection.start's server properties are cut short")
		}
		key := string(table[1 : 1+kl])
		typ := table[1+kl]
		table = table[2+kl:]
		var vlen int
		switch typ {
		case 'S', 'F', 'A', 'x':
			if len(table) < 4 {
				return "", errors.New("connection.start's server properties are cut short")
			}
			l := binary.BigEndian.Uint32(table)
			if uint64(l) > uint64(len(table)-4) {
				return "", errors.New("connection.start's server properties are cut short")
			}
			if typ == 'S' && key == "version" {
				return string(table[4 : 4+l]), nil
			}
			vlen = 4 + int(l)
		case 't', 'b', 'B':
			vlen = 1
		case 's', 'u', 'U':
			vlen = 2
		case 'I', 'i', 'f':
			vlen = 4
		case 'D':
			vlen = 5
		case 'l', 'L', 'd', 'T':
			vlen = 8
		case 'V':
			vlen = 0
		default:
			return "", fmt.Errorf("connection.start's server properties hold a field of unknown type %q", typ)
		}
		if len(table) < vlen {
			return "", errors.New("connection.start's server properties are cut short")
		}
		table = table[vlen:]
	}
	return "", errors.New("the broker sent no version in connection.start")
}
