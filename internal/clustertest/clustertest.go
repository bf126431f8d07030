// Package clustertest is what the cluster tests share: the three nodes of
// scripts/cluster (on the machine's RabbitMQ, rabbit2@localhost,
// rabbit3@localhost and rabbit4@localhost on 127.0.0.1:5690, 5700 and 5710;
// on RabbitMQ 4.3, rabbit5@localhost to rabbit7@localhost on 5720, 5730 and
// 5740), reached by name through scripts/cluster's ctl and queues (each
// node's own CLI), and
// the faults the tests inject into them: a clean stop, kill -9 of a node's
// Erlang VM, a network partition and a black-holed AMQP port (iptables
// rules on the loopback interface, always removed at cleanup).
//
// It never touches the machine's own broker (rabbit@localhost on 5672):
// every rabbitmqctl call names a cluster node, and every iptables
// rule names a cluster node's ports or addresses. It imports only the
// standard library and internal/testenv.
package clustertest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/testenv"
)

// Node is one node of the test cluster.
type Node struct {
	N    int    // 2, 3 or 4 (the machine's RabbitMQ); 5, 6 or 7 (4.3)
	Name string // rabbitN@localhost
	URL  string // its AMQP URL, from ACEMQ_TEST_CLUSTER_URLS
	Port int    // its AMQP port: 5670 + 10 N
}

func (n Node) String() string { return n.Name }

// DistPort is the node's Erlang distribution port (scripts/cluster).
func (n Node) DistPort() int { return 25670 + 10*n.N }

// DistAddr is the loopback address the node dials the other nodes from
// (scripts/cluster): 127.0.0.N.
func (n Node) DistAddr() string { return fmt.Sprintf("127.0.0.%d", n.N) }

// Nodes returns the cluster's nodes, in the order of
// ACEMQ_TEST_CLUSTER_URLS, or skips the test (see testenv.ClusterURLs).
func Nodes(t testing.TB) []Node {
	t.Helper()
	var nodes []Node
	for _, raw := range testenv.ClusterURLs(t) {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("ACEMQ_TEST_CLUSTER_URLS: %v", err)
		}
		port, err := strconv.Atoi(u.Port())
		if err != nil || (port-5670)%10 != 0 || port < 5690 || port > 5740 {
			t.Fatalf("ACEMQ_TEST_CLUSTER_URLS: %s is not a node of scripts/cluster (ports 5690 to 5740)", u.Host)
		}
		n := (port - 5670) / 10
		nodes = append(nodes, Node{N: n, Name: fmt.Sprintf("rabbit%d@localhost", n), URL: raw, Port: port})
	}
	return nodes
}

// URLList is the nodes' URLs, comma-separated: what acemq.Connect takes.
func URLList(nodes []Node) string {
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.URL
	}
	return strings.Join(urls, ",")
}

// NodeAt returns the node whose AMQP port endpoint (a URL, as
// acemq.Conn.Endpoint reports it) names, and whether there is one.
func NodeAt(nodes []Node, endpoint string) (Node, bool) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return Node{}, false
	}
	for _, n := range nodes {
		if u.Port() == strconv.Itoa(n.Port) {
			return n, true
		}
	}
	return Node{}, false
}

// Ctl runs rabbitmqctl -q -n NODE args with the node's own CLI
// (scripts/cluster ctl), within 90 s, and returns its output.
func (n Node) Ctl(args ...string) (string, error) {
	return n.cli(90*time.Second, "ctl", args...)
}

// cli runs scripts/cluster's ctl or queues for the node.
func (n Node) cli(timeout time.Duration, tool string, args ...string) (string, error) {
	return run(timeout, script(), append([]string{tool, strconv.Itoa(n.N)}, args...)...)
}

func script() string { return filepath.Join(testenv.Root(), "scripts", "cluster") }

func run(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Stop stops the node's RabbitMQ application cleanly (stop_app): its
// connections are closed and its AMQP port refuses new ones.
func (n Node) Stop() error {
	_, err := n.Ctl("stop_app")
	return err
}

// Start starts the application of a node stopped with Stop and waits
// until its AMQP port takes connections.
func (n Node) Start() error {
	if _, err := n.Ctl("start_app"); err != nil {
		return err
	}
	return n.awaitAMQP(90 * time.Second)
}

// Pid is the operating system pid of the node's Erlang VM, as the node
// itself reports it.
func (n Node) Pid() (int, error) {
	out, err := n.Ctl("eval", "os:getpid().")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.Trim(out, "\"\n "))
}

// Kill kills the node's Erlang VM with SIGKILL: no clean shutdown, no
// goodbye to its clients or the other nodes.
func (n Node) Kill() error {
	pid, err := n.Pid()
	if err != nil {
		return err
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// Restart starts a killed node's VM again (scripts/cluster start N) and
// waits until it takes AMQP connections; it rejoins the cluster.
func (n Node) Restart() error {
	_, err := run(4*time.Minute, script(), "start", strconv.Itoa(n.N))
	return err
}

// Running reports whether the node's RabbitMQ application runs.
func (n Node) Running() bool {
	out, err := n.cli(30*time.Second, "ctl", "eval", "rabbit:is_running().")
	return err == nil && strings.Contains(out, "true")
}

// AMQPUp reports whether the node's AMQP port takes a TCP connection.
func (n Node) AMQPUp() bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", n.Port), 2*time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func (n Node) awaitAMQP(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !n.AMQPUp() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s does not take AMQP connections on %d %s after starting", n, n.Port, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return nil
}

// QuorumCritical reports whether stopping the node now would leave a
// quorum queue without a majority (rabbitmq-queues
// check_if_node_is_quorum_critical): a rolling restart waits until it is
// not before stopping the next node.
func (n Node) QuorumCritical() bool {
	_, err := n.cli(60*time.Second, "queues", "check_if_node_is_quorum_critical")
	return err != nil
}

// Leader returns the node that leads the quorum queue, asking the first of
// nodes whose application runs.
func Leader(nodes []Node, queue string) (Node, error) {
	var lastErr error
	for _, n := range nodes {
		out, err := n.Ctl("list_queues", "name", "leader", "--no-table-headers")
		if err != nil {
			lastErr = err
			continue
		}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && f[0] == queue {
				for _, m := range nodes {
					if m.Name == f[1] {
						return m, nil
					}
				}
				return Node{}, fmt.Errorf("the queue %s is led by %s, not a test node", queue, f[1])
			}
		}
		return Node{}, fmt.Errorf("%s does not list the queue %s", n, queue)
	}
	return Node{}, fmt.Errorf("no node answered: %w", lastErr)
}

// Restore brings every node back (a node whose VM is gone is started again,
// a stopped application started) and waits until each takes AMQP
// connections and sees all the others running. Tests register it first,
// so that it runs last, even when they fail.
func Restore(t testing.TB, nodes []Node) {
	t.Helper()
	for _, n := range nodes {
		if _, err := n.Pid(); err != nil {
			if err := n.Restart(); err != nil {
				t.Errorf("restoring %s: %v", n, err)
			}
			continue
		}
		if !n.Running() {
			if err := n.Start(); err != nil {
				t.Errorf("restoring %s: %v", n, err)
			}
		}
	}
	for _, n := range nodes {
		if awaitClustered(n, nodes, time.Minute) {
			continue
		}
		// A node that runs but has not come back (a node paused by a
		// partition that did not resume, say) is restarted.
		t.Logf("%s is not back in the cluster a minute after restoring; restarting it", n)
		_ = n.Kill()
		if err := n.Restart(); err != nil {
			t.Errorf("restoring %s: %v", n, err)
			continue
		}
		if !awaitClustered(n, nodes, 2*time.Minute) {
			t.Errorf("%s is not back in the cluster 2 minutes after a restart", n)
		}
	}
}

// awaitClustered waits until n takes AMQP connections and sees every node
// running.
func awaitClustered(n Node, nodes []Node, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !n.AMQPUp() || !clustered(n, nodes) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Second)
	}
	return true
}

// Clustered reports whether n sees every node of nodes running.
func Clustered(n Node, nodes []Node) bool { return clustered(n, nodes) }

func clustered(n Node, nodes []Node) bool {
	out, err := n.Ctl("eval", `io:format("~p", [rabbit_nodes:all_running()]).`)
	if err != nil {
		return false
	}
	for _, m := range nodes {
		if !strings.Contains(out, m.Name) {
			return false
		}
	}
	return true
}

// iptables runs iptables (within 30 s).
func iptables(args ...string) error {
	_, err := run(30*time.Second, "iptables", args...)
	return err
}

// Iptables skips the test, or fails it in CI, when iptables cannot be
// used here (not installed, or no permission to change the rules).
func Iptables(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("iptables"); err != nil {
		if testenv.InCI() {
			t.Fatalf("the test needs iptables (apt-get install iptables): %v", err)
		}
		t.Skipf("the test needs iptables: %v", err)
	}
	if err := iptables("-S", "INPUT"); err != nil {
		if testenv.InCI() {
			t.Fatalf("the test needs to change iptables rules: %v", err)
		}
		t.Skipf("the test needs to change iptables rules: %v", err)
	}
}

// rules adds iptables rules to the INPUT chain, each tagged with a comment
// naming the test, and removes them at cleanup (and when heal is called),
// whatever happens to the test.
func rules(t testing.TB, tag string, specs [][]string) (heal func()) {
	t.Helper()
	comment := []string{"-m", "comment", "--comment", "acemq-test-" + tag}
	var added [][]string
	heal = func() {
		for i := len(added) - 1; i >= 0; i-- {
			if err := iptables(append(append([]string{"-D", "INPUT"}, added[i]...), comment...)...); err != nil {
				t.Errorf("removing the iptables rule %v: %v", added[i], err)
			}
		}
		added = nil
	}
	t.Cleanup(heal)
	for _, s := range specs {
		if err := iptables(append(append([]string{"-I", "INPUT"}, s...), comment...)...); err != nil {
			t.Fatalf("adding the iptables rule %v: %v", s, err)
		}
		added = append(added, s)
	}
	return heal
}

// Partition cuts the node off from the other nodes: every packet to or
// from its distribution port, and from or to the address it dials them
// from, is dropped on the loopback interface. Its AMQP port stays
// reachable. The rules are removed by heal and at cleanup, whichever comes
// first.
func Partition(t testing.TB, n Node) (heal func()) {
	t.Helper()
	dist := strconv.Itoa(n.DistPort())
	return rules(t, "partition-"+n.Name, [][]string{
		{"-i", "lo", "-p", "tcp", "--dport", dist, "-j", "DROP"},
		{"-i", "lo", "-p", "tcp", "--sport", dist, "-j", "DROP"},
		{"-i", "lo", "-s", n.DistAddr(), "-j", "DROP"},
		{"-i", "lo", "-d", n.DistAddr(), "-j", "DROP"},
	})
}

// BlackHole drops every packet to the node's AMQP port: a dial there gets
// no answer at all (not even a refusal), as with a host that is gone
// from the network. Removed by heal and at cleanup.
func BlackHole(t testing.TB, n Node) (heal func()) {
	t.Helper()
	return rules(t, "blackhole-"+n.Name, [][]string{
		{"-i", "lo", "-p", "tcp", "--dport", strconv.Itoa(n.Port), "-j", "DROP"},
	})
}
