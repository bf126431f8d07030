package reliability

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/clustertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/topology"
)

// The cluster scenarios: the load run of load_test.go against the three
// nodes of scripts/cluster, the producer and the consumer each connected
// with the list of all three (acemq.Connect("n1,n2,n3")), the queue a
// quorum queue replicated on the three (WithInitialGroupSize(3)). They run
// only with ACEMQ_TEST_CLUSTER=1 and ACEMQ_TEST_CLUSTER_URLS set (CI's
// cluster step), never touch the machine's own broker, and bring every node
// back at cleanup even when they fail.

// cluster skips unless the cluster tests were asked for, and registers the
// nodes' restoration, which runs even when the test fails.
func cluster(t *testing.T) []clustertest.Node {
	t.Helper()
	nodes := clustertest.Nodes(t)
	t.Cleanup(func() { clustertest.Restore(t, nodes) })
	return nodes
}

// clusterVersion is the version of RabbitMQ the cluster runs.
func clusterVersion(t *testing.T, nodes []clustertest.Node) testenv.Version {
	t.Helper()
	v := testenv.BrokerVersion(t, nodes[0].URL)
	t.Logf("the cluster runs RabbitMQ %v", v)
	return v
}

func clusterLoad(scenario string, fault func(ctx context.Context, r *loadRun)) loadConfig {
	n, minSend := loadSize()
	return loadConfig{
		scenario:       scenario,
		messages:       n,
		minSend:        minSend,
		producers:      8,
		drain:          2 * time.Minute,
		wantRecoveries: true,
		queueOpts:      []topology.Option{topology.WithInitialGroupSize(3)},
		fault:          fault,
	}
}

// awaitThird waits until a third of the messages are confirmed: the fault
// lands in the middle of the sending.
func awaitThird(ctx context.Context, r *loadRun) bool {
	for r.confirmedN.Load() < int64(r.cfg.messages/3) {
		if !sleepCtx(ctx, 50*time.Millisecond) {
			r.t.Errorf("the producers finished before a third of the messages were confirmed")
			return false
		}
	}
	return true
}

// nodeOf is the node a connection is on now.
func nodeOf(r *loadRun, nodes []clustertest.Node, c *acemq.Conn) (clustertest.Node, bool) {
	n, ok := clustertest.NodeAt(nodes, c.Endpoint())
	if !ok {
		r.t.Errorf("the connection %s is on no node of the cluster (endpoint %q)", c.Name(), c.Endpoint())
	}
	return n, ok
}

// TestClusterProducerNodeRestarted: the node the producer is connected to
// is stopped cleanly (stop_app) once a third of the messages are
// confirmed, stays down 3 s and is started again. The producer moves to
// another node and goes on; nothing confirmed is lost.
func TestClusterProducerNodeRestarted(t *testing.T) {
	nodes := cluster(t)
	cfg := clusterLoad("cluster-producer-node-restarted", nil)
	if clusterVersion(t, nodes).AtLeast(4, 0) {
		// RabbitMQ 4.x's stop_app hands the node's quorum queue
		// leaderships over before it closes client connections: 6 s on an
		// idle node, 15 s under this load on the 2-core CI machine (3.10:
		// about a second). The sending lasts long enough for the stop to
		// land inside it.
		cfg.minSend *= 4
	}
	cfg.fault = func(ctx context.Context, r *loadRun) {
		if !awaitThird(ctx, r) {
			return
		}
		n, ok := nodeOf(r, nodes, r.prod)
		if !ok {
			return
		}
		r.note("stop_app on %s, the producer's node (the consumer is on %s)", n, r.cons.Endpoint())
		if err := n.Stop(); err != nil {
			r.t.Errorf("%v", err)
			return
		}
		r.faults.Add(1)
		r.markFault()
		r.note("stopped; %d confirmed; the producer is now on %q", r.confirmedN.Load(), r.prod.Endpoint())
		if ctx.Err() != nil {
			r.t.Errorf("the node stopped after the producers had finished: lengthen the sending")
		}
		sleepCtx(context.Background(), 3*time.Second)
		if err := n.Start(); err != nil {
			r.t.Errorf("%v", err)
			return
		}
		r.note("%s started again", n)
	}
	runLoad(t, clustertest.URLList(nodes), cfg)
}

// TestClusterLeaderKilled: the Erlang VM of the node leading the quorum
// queue is killed with SIGKILL once a third of the messages are
// confirmed: no clean shutdown, no goodbye to clients or the other nodes.
// The other two elect a new leader; the figures give the time from the
// kill to the first confirm after it. The node is started again 5 s later.
func TestClusterLeaderKilled(t *testing.T) {
	nodes := cluster(t)
	cfg := clusterLoad("cluster-leader-killed", nil)
	cfg.minSend *= 2 // the kill must land while the producers send
	cfg.fault = func(ctx context.Context, r *loadRun) {
		// The leader and its VM's pid are found first, so that the kill
		// itself is one system call once a third is confirmed.
		leader, err := clustertest.Leader(nodes, r.queue)
		if err != nil {
			r.t.Errorf("finding the queue's leader: %v", err)
			return
		}
		pid, err := leader.Pid()
		if err != nil {
			r.t.Errorf("%v", err)
			return
		}
		if !awaitThird(ctx, r) {
			return
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			r.t.Errorf("kill -9 %d (%s): %v", pid, leader, err)
			return
		}
		r.faults.Add(1)
		r.markFault()
		r.note("killed %s (pid %d), the queue's leader; producer on %s, consumer on %s", leader, pid, r.prod.Endpoint(), r.cons.Endpoint())
		if ctx.Err() != nil {
			r.t.Errorf("the kill landed after the producers had finished: lengthen the sending")
		}
		sleepCtx(context.Background(), 5*time.Second)
		if l, err := clustertest.Leader(nodes, r.queue); err == nil {
			r.note("the new leader is %s", l)
		}
		r.note("starting %s again", leader)
		if err := leader.Restart(); err != nil {
			r.t.Errorf("%v", err)
			return
		}
		r.note("%s is back", leader)
	}
	runLoad(t, clustertest.URLList(nodes), cfg)
}

// TestClusterRollingRestart: every node in turn is stopped (stop_app),
// left down 3 s and started again, the next one only once stopping it
// would not leave the queue without a majority
// (check_if_node_is_quorum_critical). The consumer follows: it is
// reattached after every loss of its node, and it processes messages after
// the last restart.
func TestClusterRollingRestart(t *testing.T) {
	nodes := cluster(t)
	cfg := clusterLoad("cluster-rolling-restart", nil)
	cfg.minSend = max(4*cfg.minSend, time.Minute) // three restarts must fit in the sending
	var (
		run              *loadRun
		handledAfterLast int64
		sendingAfterLast bool
		consNodes        []string
	)
	cfg.fault = func(ctx context.Context, r *loadRun) {
		run = r
		if !sleepCtx(ctx, cfg.minSend/8) {
			return
		}
		for i, n := range nodes {
			if i > 0 {
				ok := pollFor(2*time.Minute, func() bool { return !n.QuorumCritical() })
				if !ok {
					r.t.Errorf("%s stayed quorum critical for 2 minutes: a member did not catch up", n)
					return
				}
			}
			r.note("stop_app on %s (producer on %s, consumer on %s)", n, r.prod.Endpoint(), r.cons.Endpoint())
			consNodes = append(consNodes, r.cons.Endpoint())
			if err := n.Stop(); err != nil {
				r.t.Errorf("%v", err)
				return
			}
			r.faults.Add(1)
			sleepCtx(context.Background(), 3*time.Second)
			if err := n.Start(); err != nil {
				r.t.Errorf("%v", err)
				return
			}
			r.note("%s started again", n)
		}
		handledAfterLast = r.handled.Load()
		sendingAfterLast = ctx.Err() == nil
		consNodes = append(consNodes, r.cons.Endpoint())
	}
	runLoad(t, clustertest.URLList(nodes), cfg)
	t.Logf("the consumer's node before each restart and after the last: %q", consNodes)
	// The run's drain already checked that every confirmed message was
	// processed; the consumer must also have been working after the last
	// restart, not only before it.
	switch {
	case run == nil || len(consNodes) != len(nodes)+1:
		t.Errorf("the rolling restart did not run to its end")
	case !sendingAfterLast:
		t.Errorf("the producers finished before the rolling restart did: lengthen the sending")
	case run.handled.Load() <= handledAfterLast:
		t.Errorf("the consumer processed nothing after the last restart")
	}
}

// TestClusterPartition: the node the producer is on is cut off from the
// other two (iptables rules on the loopback interface against its
// distribution traffic; its AMQP port stays open). What follows depends on
// the version (docs/reliability.md, scenario 14 and "Partitions on
// RabbitMQ 4.x"):
//
//   - RabbitMQ 3.10, cluster_partition_handling = pause_minority: the
//     cut-off node pauses once it notices (net_ticktime, 15 s in
//     scripts/cluster), closing its client connections; the clients move to
//     the majority. The rules are removed once the producer has moved (or
//     after 90 s); the node then resumes.
//   - RabbitMQ 4.x has no partition handling strategy: the cut-off node
//     keeps its client connections, and the quorum queue cannot commit
//     through it, so the producer's publishes there are not confirmed: they
//     fail with a confirm timeout ("may or may not have been delivered") and
//     are republished, on the same connection, which the library does not
//     leave. The rules are removed after 30 s; the node rejoins and
//     publishing resumes at once.
//
// On both, nothing confirmed is lost, and the rules are removed at cleanup
// whatever happens.
func TestClusterPartition(t *testing.T) {
	nodes := cluster(t)
	clustertest.Iptables(t)
	v4 := clusterVersion(t, nodes).AtLeast(4, 0)
	cfg := clusterLoad("cluster-partition", nil)
	cfg.minSend *= 4 // the pause takes net_ticktime to come
	var (
		run               *loadRun
		confirmedAtHeal   int64 = -1
		timeoutsDuringCut int64
	)
	if v4 {
		cfg.wantRecoveries = false // the node keeps its connections
	}
	cfg.fault = func(ctx context.Context, r *loadRun) {
		run = r
		if !sleepCtx(ctx, cfg.minSend/8) {
			return
		}
		n, ok := nodeOf(r, nodes, r.prod)
		if !ok {
			return
		}
		r.note("cutting %s (the producer's node; consumer on %s) off from the others", n, r.cons.Endpoint())
		heal := clustertest.Partition(r.t, n)
		r.faults.Add(1)
		r.markFault()
		if v4 {
			// Longer than the confirm timeout (10 s) twice over: the
			// producer's publishes through the cut-off node come back
			// unconfirmed meanwhile.
			sleepCtx(context.Background(), 30*time.Second)
			r.mu.Lock()
			timeoutsDuringCut = int64(r.errKinds["confirm-timeout"])
			r.mu.Unlock()
			r.note("after 30 s: the producer is on %q, %d confirm timeouts; removing the rules", r.prod.Endpoint(), timeoutsDuringCut)
			heal()
			confirmedAtHeal = r.confirmedN.Load()
			if ctx.Err() != nil {
				r.t.Errorf("the partition healed after the producers had finished: lengthen the sending")
			}
			if !pollFor(time.Minute, func() bool { return n.Running() && clustertest.Clustered(n, nodes) }) {
				r.t.Errorf("%s did not rejoin the cluster within a minute of the partition healing", n)
				return
			}
			r.note("%s is back in the cluster", n)
			return
		}
		moved := pollFor(90*time.Second, func() bool {
			at, ok := clustertest.NodeAt(nodes, r.prod.Endpoint())
			return ok && at.N != n.N
		})
		r.note("producer moved: %v, now on %q; removing the rules", moved, r.prod.Endpoint())
		if !moved {
			r.t.Errorf("the producer did not leave the cut-off node %s within 90 s", n)
		}
		heal()
		if pollFor(time.Minute, n.Running) {
			r.note("%s resumed", n)
			return
		}
		// Seen in two of seven runs: the paused node had not resumed a
		// minute after the rules were removed. That is the broker's
		// recovery, not the client's; the node is restarted so that the
		// cluster is whole again, and the run goes on.
		r.note("%s has not resumed a minute after the partition healed; restarting it (kill -9, start)", n)
		_ = n.Kill()
		if err := n.Restart(); err != nil {
			r.t.Errorf("restarting %s after the partition: %v", n, err)
		}
	}
	runLoad(t, clustertest.URLList(nodes), cfg)
	if !v4 {
		return
	}
	switch {
	case run == nil || confirmedAtHeal < 0:
		t.Errorf("the partition was not made and healed")
	case timeoutsDuringCut == 0:
		// A publish through the minority that was confirmed, or that never
		// came back, would be a broken promise; one that timed out is the
		// promise kept.
		t.Errorf("no publish through the cut-off node timed out in 30 s: were they confirmed without a majority?")
	case confirmedAtHeal < int64(cfg.messages) && run.confirmedN.Load() <= confirmedAtHeal:
		t.Errorf("no publish was confirmed after the partition healed (%d confirmed before)", confirmedAtHeal)
	}
}
