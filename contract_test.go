package acemq_test

// Conformance with contract-fixtures.json (docs/wire.md §1.2, §5, §7). Every
// expectation is derived a second, independent way inside the test — its own
// policy parser, doubling, threshold, age and naming code (the "model"
// below) — and both the fixture and the library are checked against it, so
// a fixture and an implementation that are wrong in the same way are caught.

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

type contractFixture struct {
	GeneratedBy                      string `json:"generatedBy"`
	DefaultBrokerWaitThresholdMillis int64  `json:"defaultBrokerWaitThresholdMillis"`
	DeadLetterExchange               string `json:"deadLetterExchange"`
	RetryExchange                    string `json:"retryExchange"`
	RetrySchedules                   []struct {
		Name                      string  `json:"name"`
		How                       string  `json:"how"`
		MaxAttempts               int     `json:"maxAttempts"`
		MaxMessageAgeMillis       int64   `json:"maxMessageAgeMillis"`
		HasMaxMessageAge          bool    `json:"hasMaxMessageAge"`
		JitterFactor              float64 `json:"jitterFactor"`
		BrokerWaitThresholdMillis int64   `json:"brokerWaitThresholdMillis"`
		ScheduleMillis            []int64 `json:"scheduleMillis"`
		BrokerRungDelaysMillis    []int64 `json:"brokerRungDelaysMillis"`
		Decisions                 []struct {
			Attempt          int   `json:"attempt"`
			MessageAgeMillis int64 `json:"messageAgeMillis"`
			Retries          bool  `json:"retries"`
		} `json:"decisions"`
	} `json:"retrySchedules"`
	MaxMessageAge struct {
		DefaultMillis     int64 `json:"defaultMillis"`
		ZeroMeansNoLimit  bool  `json:"zeroMeansNoLimit"`
		UnknownAgeRetries bool  `json:"unknownAgeRetries"`
		Cases             []struct {
			MaxMessageAgeMillis int64 `json:"maxMessageAgeMillis"`
			MessageAgeMillis    int64 `json:"messageAgeMillis"`
			Retries             bool  `json:"retries"`
		} `json:"cases"`
	} `json:"maxMessageAge"`
	Jitter struct {
		Policy                  string  `json:"policy"`
		Factor                  float64 `json:"factor"`
		AppliesInBothDirections bool    `json:"appliesInBothDirections"`
		MinMultiplier           float64 `json:"minMultiplier"`
		MaxMultiplier           float64 `json:"maxMultiplier"`
		AppliesToConsumerWaits  bool    `json:"appliesToConsumerWaits"`
		AppliesToBrokerWaits    bool    `json:"appliesToBrokerWaits"`
		FlooredAtMillis         int64   `json:"flooredAtMillis"`
	} `json:"jitter"`
	BrokerWaitThreshold struct {
		DefaultMillis int64 `json:"defaultMillis"`
		Cases         []struct {
			ThresholdMillis int64 `json:"thresholdMillis"`
			DelayMillis     int64 `json:"delayMillis"`
			WaitsInBroker   bool  `json:"waitsInBroker"`
		} `json:"cases"`
	} `json:"brokerWaitThreshold"`
	Naming struct {
		Queue           string `json:"queue"`
		DeadLetterQueue string `json:"deadLetterQueue"`
		ParkedQueue     string `json:"parkedQueue"`
		RetryQueues     []struct {
			DelayMillis int64  `json:"delayMillis"`
			Queue       string `json:"queue"`
		} `json:"retryQueues"`
	} `json:"naming"`
	RungArguments []struct {
		Queue       string         `json:"queue"`
		DelayMillis int64          `json:"delayMillis"`
		Arguments   map[string]any `json:"arguments"`
	} `json:"rungArguments"`
	Topology          fixtureTopology `json:"topology"`
	QueueTypeDefaults struct {
		SourceQueue                        string `json:"sourceQueue"`
		SourceQueueWithDeadLetter          string `json:"sourceQueueWithDeadLetter"`
		ExplicitClassicQueue               string `json:"explicitClassicQueue"`
		ExplicitClassicQueueWithDeadLetter string `json:"explicitClassicQueueWithDeadLetter"`
		DeadLetterQueue                    string `json:"deadLetterQueue"`
		ParkedQueue                        string `json:"parkedQueue"`
		RetryRung                          string `json:"retryRung"`
		Durability                         struct {
			EveryDeclaredQueueIsDurable bool `json:"everyDeclaredQueueIsDurable"`
		} `json:"durability"`
	} `json:"queueTypeDefaults"`
}

type fixtureTopology struct {
	SourceQueue            string  `json:"sourceQueue"`
	Policy                 string  `json:"policy"`
	PolicyScheduleMillis   []int64 `json:"policyScheduleMillis"`
	PolicyRungDelaysMillis []int64 `json:"policyRungDelaysMillis"`
	Exchanges              []struct {
		Name       string `json:"name"`
		Type       string `json:"type"`
		Durable    bool   `json:"durable"`
		DeclaredBy string `json:"declaredBy"`
	} `json:"exchanges"`
	Queues []struct {
		Name       string         `json:"name"`
		Type       string         `json:"type"`
		Durable    bool           `json:"durable"`
		Arguments  map[string]any `json:"arguments"`
		DeclaredBy string         `json:"declaredBy"`
	} `json:"queues"`
	Bindings []struct {
		Queue      string `json:"queue"`
		Exchange   string `json:"exchange"`
		RoutingKey string `json:"routingKey"`
		DeclaredBy string `json:"declaredBy"`
	} `json:"bindings"`
}

// loadContract reads contract-fixtures.json; a missing file fails (in CI a
// missing contract folder fails too).
func loadContract(t *testing.T) contractFixture {
	t.Helper()
	raw, err := os.ReadFile(testenv.ContractFile(t, "contract-fixtures.json"))
	if err != nil {
		t.Fatalf("reading the contract fixture: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var f contractFixture
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("parsing the contract fixture: %v", err)
	}
	if f.GeneratedBy != "acemq-java-amqp ContractFixtures" {
		t.Fatalf("generatedBy = %q, not the Java generator", f.GeneratedBy)
	}
	if len(f.RetrySchedules) == 0 || len(f.Topology.Queues) == 0 {
		t.Fatal("the contract fixture has no retry schedules or no topology")
	}
	return f
}

// policyModel is the test's own reading of a policy, independent of retry.go.
type policyModel struct {
	attempts   int
	initialMS  int64
	maxMS      int64
	multiplier int64
	jitter     float64
	threshold  int64
	maxAgeMS   int64
}

const modelDefaultThresholdMS = 30_000

func (m policyModel) schedule() []int64 {
	out := []int64{}
	d := m.initialMS
	for i := 0; i < m.attempts-1; i++ {
		out = append(out, min(d, m.maxMS))
		if d < m.maxMS {
			d *= m.multiplier
		}
	}
	return out
}

func modelWaitsInBroker(thresholdMS, delayMS int64) bool {
	return thresholdMS > 0 && delayMS > 0 && delayMS >= thresholdMS
}

func (m policyModel) rungs() []int64 {
	out := []int64{}
	for _, d := range m.schedule() {
		if modelWaitsInBroker(m.threshold, d) && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

func (m policyModel) retries(attempt int, ageMS int64, ageKnown bool) bool {
	if attempt >= m.attempts {
		return false
	}
	return m.maxAgeMS == 0 || !ageKnown || ageMS < m.maxAgeMS
}

// modelDelayName renders a delay as Java does: whole hours, else whole
// minutes, else whole seconds, else milliseconds.
func modelDelayName(ms int64) string {
	switch {
	case ms > 0 && ms%(60*60*1000) == 0:
		return strconv.FormatInt(ms/(60*60*1000), 10) + "h"
	case ms > 0 && ms%(60*1000) == 0:
		return strconv.FormatInt(ms/(60*1000), 10) + "m"
	case ms > 0 && ms%1000 == 0:
		return strconv.FormatInt(ms/1000, 10) + "s"
	}
	return strconv.FormatInt(ms, 10) + "ms"
}

func modelRung(q string, ms int64) string { return q + ".retry." + modelDelayName(ms) }

var (
	howFactory  = regexp.MustCompile(`^\s*(none|fixed|exponential)\(([^)]*)\)`)
	howModifier = regexp.MustCompile(`^\.(giveUpAfter|withJitter|waitInBrokerFrom)\(([^)]*)\)`)
	howDuration = regexp.MustCompile(`^(\d+)(ms|s|m|h|d)$`)
)

func parseHowDuration(t *testing.T, s string) int64 {
	t.Helper()
	m := howDuration.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		t.Fatalf("cannot read the duration %q", s)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	unit := map[string]int64{"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}[m[2]]
	return n * unit
}

// parsePolicy reads the fixture's `how` — none(), fixed(n, d),
// exponential(n, initial, max), then any of .giveUpAfter(d), .withJitter(f),
// .waitInBrokerFrom(d), and optionally " at the default threshold" — into
// the library's policy (built through its public factories) and the test's
// own model.
func parsePolicy(t *testing.T, how string) (retry.Policy, policyModel) {
	t.Helper()
	rest := strings.TrimSuffix(strings.TrimSpace(how), " at the default threshold")
	m := howFactory.FindStringSubmatch(rest)
	if m == nil {
		t.Fatalf("cannot read the policy %q", how)
	}
	rest = rest[len(m[0]):]
	var args []string
	if strings.TrimSpace(m[2]) != "" {
		args = strings.Split(m[2], ",")
	}
	ms := func(i int) int64 { return parseHowDuration(t, args[i]) }
	n := func() int {
		v, err := strconv.Atoi(strings.TrimSpace(args[0]))
		if err != nil {
			t.Fatalf("policy %q: %v", how, err)
		}
		return v
	}
	var p retry.Policy
	var model policyModel
	switch m[1] {
	case "none":
		if len(args) != 0 {
			t.Fatalf("policy %q: none() takes no arguments", how)
		}
		p = retry.None()
		model = policyModel{attempts: 1, multiplier: 1, threshold: modelDefaultThresholdMS}
	case "fixed":
		if len(args) != 2 {
			t.Fatalf("policy %q: fixed takes two arguments", how)
		}
		p = retry.Fixed(n(), time.Duration(ms(1))*time.Millisecond)
		model = policyModel{attempts: n(), initialMS: ms(1), maxMS: ms(1), multiplier: 1, threshold: modelDefaultThresholdMS}
	case "exponential":
		if len(args) != 3 {
			t.Fatalf("policy %q: exponential takes three arguments", how)
		}
		p = retry.Exponential(n(), time.Duration(ms(1))*time.Millisecond, time.Duration(ms(2))*time.Millisecond)
		model = policyModel{attempts: n(), initialMS: ms(1), maxMS: ms(2), multiplier: 2, jitter: 0.2, threshold: modelDefaultThresholdMS}
	}
	for rest != "" {
		mm := howModifier.FindStringSubmatch(rest)
		if mm == nil {
			t.Fatalf("policy %q: cannot read %q", how, rest)
		}
		rest = rest[len(mm[0]):]
		switch mm[1] {
		case "giveUpAfter":
			model.maxAgeMS = parseHowDuration(t, mm[2])
			p = p.GiveUpAfter(time.Duration(model.maxAgeMS) * time.Millisecond)
		case "withJitter":
			f, err := strconv.ParseFloat(strings.TrimSpace(mm[2]), 64)
			if err != nil {
				t.Fatalf("policy %q: %v", how, err)
			}
			model.jitter = f
			p = p.Jitter(f)
		case "waitInBrokerFrom":
			model.threshold = parseHowDuration(t, mm[2])
			p = p.WaitInBrokerFrom(time.Duration(model.threshold) * time.Millisecond)
		}
	}
	return p, model
}

func millis(ds []time.Duration) []int64 {
	out := []int64{}
	for _, d := range ds {
		out = append(out, d.Milliseconds())
	}
	return out
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

func TestContractTopLevel(t *testing.T) {
	f := loadContract(t)
	for _, c := range []struct{ what, fixture, library, want string }{
		{"dead-letter exchange", f.DeadLetterExchange, contract.DeadLetterExchange, "acemq.dlx"},
		{"retry exchange", f.RetryExchange, contract.RetryExchange, "acemq.retry"},
	} {
		if c.fixture != c.want || c.library != c.want {
			t.Errorf("%s: fixture %q, library %q, want %q", c.what, c.fixture, c.library, c.want)
		}
	}
	for _, got := range []int64{
		f.DefaultBrokerWaitThresholdMillis,
		f.BrokerWaitThreshold.DefaultMillis,
		acemq.Plan(retry.None()).Threshold.Milliseconds(),
		acemq.Plan(retry.Policy{}).Threshold.Milliseconds(),
		acemq.Plan(retry.Fixed(3, time.Second)).Threshold.Milliseconds(),
		acemq.Plan(retry.Exponential(3, time.Second, time.Minute)).Threshold.Milliseconds(),
	} {
		if got != modelDefaultThresholdMS {
			t.Errorf("a default threshold is %d ms, want %d", got, modelDefaultThresholdMS)
		}
	}
}

func TestContractRetrySchedules(t *testing.T) {
	f := loadContract(t)
	rows := 0
	for _, sc := range f.RetrySchedules {
		t.Run(sc.Name, func(t *testing.T) {
			p, m := parsePolicy(t, sc.How)

			check := func(what string, fixture, model, lib any) {
				t.Helper()
				if fmt.Sprint(fixture) != fmt.Sprint(model) {
					t.Errorf("%s: fixture %v, independent derivation %v", what, fixture, model)
				}
				if fmt.Sprint(lib) != fmt.Sprint(model) {
					t.Errorf("%s: library %v, want %v", what, lib, model)
				}
			}
			check("maxAttempts", sc.MaxAttempts, m.attempts, acemq.Plan(p).MaxAttempts)
			check("maxMessageAgeMillis", sc.MaxMessageAgeMillis, m.maxAgeMS, acemq.Plan(p).MaxAge.Milliseconds())
			check("hasMaxMessageAge", sc.HasMaxMessageAge, m.maxAgeMS > 0, acemq.Plan(p).MaxAge > 0)
			check("jitterFactor", sc.JitterFactor, m.jitter, acemq.Plan(p).Jitter)
			check("brokerWaitThresholdMillis", sc.BrokerWaitThresholdMillis, m.threshold, acemq.Plan(p).Threshold.Milliseconds())
			check("scheduleMillis", sc.ScheduleMillis, m.schedule(), millis(p.Schedule()))
			check("brokerRungDelaysMillis", sc.BrokerRungDelaysMillis, m.rungs(), millis(acemq.Plan(p).BrokerRungs()))

			// The wait after attempt a is schedule[a-1], and it is held on a
			// rung exactly when the model says so.
			for i, d := range m.schedule() {
				if got := acemq.Plan(p).DelayAfter(i + 1).Milliseconds(); got != d {
					t.Errorf("DelayAfter(%d) = %d ms, want %d", i+1, got, d)
				}
				if got, want := acemq.Plan(p).WaitsInBroker(msDuration(d)), modelWaitsInBroker(m.threshold, d); got != want {
					t.Errorf("WaitsInBroker(%d ms) = %v, want %v", d, got, want)
				}
			}

			// The policy's rungs are exactly the rung queues a consumer
			// declares.
			var declared []string
			for _, d := range acemq.ConsumerDeclarations("orders.new", p) {
				if d.Kind == topology.QueueDeclaration && strings.Contains(d.Queue.Name, ".retry.") {
					declared = append(declared, d.Queue.Name)
				}
			}
			var want []string
			for _, d := range m.rungs() {
				want = append(want, modelRung("orders.new", d))
			}
			if !slices.Equal(declared, want) {
				t.Errorf("declared rungs %v, want %v", declared, want)
			}

			if len(sc.Decisions) == 0 {
				t.Fatal("no decision rows")
			}
			for _, row := range sc.Decisions {
				rows++
				model := m.retries(row.Attempt, row.MessageAgeMillis, true)
				if row.Retries != model {
					t.Errorf("decision attempt %d age %d ms: fixture %v, independent derivation %v", row.Attempt, row.MessageAgeMillis, row.Retries, model)
				}
				if got := acemq.Plan(p).ShouldRetry(row.Attempt, msDuration(row.MessageAgeMillis), true); got != model {
					t.Errorf("ShouldRetry(attempt %d, age %d ms) = %v, want %v", row.Attempt, row.MessageAgeMillis, got, model)
				}
			}
		})
	}
	if rows < 29 {
		t.Errorf("only %d decision rows were checked; the fixture has 29", rows)
	}
}

func TestContractMaxMessageAge(t *testing.T) {
	f := loadContract(t)
	mma := f.MaxMessageAge
	if mma.DefaultMillis != 0 || !mma.ZeroMeansNoLimit || !mma.UnknownAgeRetries {
		t.Errorf("fixture header changed: %+v", mma)
	}
	for _, p := range []retry.Policy{retry.None(), retry.Fixed(3, time.Second), retry.Exponential(3, time.Second, time.Minute), {}} {
		if acemq.Plan(p).MaxAge != msDuration(mma.DefaultMillis) {
			t.Errorf("%v: a factory set an age limit %v", p, acemq.Plan(p).MaxAge)
		}
	}
	if len(mma.Cases) == 0 {
		t.Fatal("no age cases")
	}
	for _, c := range mma.Cases {
		name := fmt.Sprintf("limit=%d/age=%d", c.MaxMessageAgeMillis, c.MessageAgeMillis)
		t.Run(name, func(t *testing.T) {
			m := policyModel{attempts: 5, maxAgeMS: c.MaxMessageAgeMillis}
			p := retry.Exponential(5, time.Second, 24*time.Hour).GiveUpAfter(msDuration(c.MaxMessageAgeMillis))
			want := m.retries(1, c.MessageAgeMillis, true)
			if c.Retries != want {
				t.Errorf("fixture %v, independent derivation %v", c.Retries, want)
			}
			if got := acemq.Plan(p).ShouldRetry(1, msDuration(c.MessageAgeMillis), true); got != want {
				t.Errorf("ShouldRetry = %v, want %v", got, want)
			}
			// An unknown age is young enough, whatever the limit.
			if !acemq.Plan(p).ShouldRetry(1, msDuration(c.MessageAgeMillis), false) {
				t.Error("an unknown age stopped the retries")
			}
		})
	}
}

func TestContractJitter(t *testing.T) {
	f := loadContract(t)
	j := f.Jitter
	if !j.AppliesInBothDirections || !j.AppliesToConsumerWaits || j.AppliesToBrokerWaits {
		t.Errorf("fixture's jitter rules changed: %+v", j)
	}
	if j.MinMultiplier != 1-j.Factor || j.MaxMultiplier != 1+j.Factor {
		t.Errorf("multipliers %v..%v do not follow from factor %v", j.MinMultiplier, j.MaxMultiplier, j.Factor)
	}
	var how string
	for _, sc := range f.RetrySchedules {
		if sc.Name == j.Policy {
			how = sc.How
		}
	}
	if how == "" {
		t.Fatalf("the jitter policy %q is not among the schedules", j.Policy)
	}
	p, m := parsePolicy(t, how)
	if acemq.Plan(p).Jitter != j.Factor || m.jitter != j.Factor {
		t.Fatalf("jitter factor: library %v, model %v, fixture %v", acemq.Plan(p).Jitter, m.jitter, j.Factor)
	}
	floor := msDuration(j.FlooredAtMillis)
	for _, ms := range m.schedule() {
		d := msDuration(ms)
		if acemq.Plan(p).WaitsInBroker(d) {
			t.Fatalf("the jitter policy holds %v on a rung; the consumer-wait check needs consumer waits", d)
		}
		lo := time.Duration(float64(d) * j.MinMultiplier)
		hi := time.Duration(float64(d) * j.MaxMultiplier)
		var below, above bool
		for range 4000 {
			w := acemq.Plan(p).Jittered(d)
			if w < lo || w > hi || w < floor {
				t.Fatalf("a consumer wait for %v was %v, outside [%v, %v] or below the floor %v", d, w, lo, hi, floor)
			}
			below = below || w < d
			above = above || w > d
		}
		if !below || !above {
			t.Errorf("jitter for %v went one way only (below %v, above %v)", d, below, above)
		}
	}
	// Floored at 1 ms, whatever the policy.
	for _, pol := range []retry.Policy{p, retry.Fixed(3, 0), retry.Fixed(3, 100*time.Microsecond).Jitter(1)} {
		for _, d := range []time.Duration{0, time.Microsecond, 900 * time.Microsecond} {
			for range 200 {
				if w := acemq.Plan(pol).Jittered(d); w < floor {
					t.Fatalf("%v: a consumer wait for %v was %v, below the floor %v", pol, d, w, floor)
				}
			}
		}
	}
	// Fixed waits are not jittered.
	if w := acemq.Plan(retry.Fixed(3, 20*time.Millisecond)).Jittered(20 * time.Millisecond); w != 20*time.Millisecond {
		t.Errorf("a fixed wait was jittered to %v", w)
	}
	// A broker wait equals the scheduled delay exactly: the rung is named
	// after it and its TTL is the delay, for every rung of every schedule.
	for _, sc := range f.RetrySchedules {
		p, m := parsePolicy(t, sc.How)
		rungs := map[string]int64{}
		for _, d := range acemq.ConsumerDeclarations("q", p) {
			if d.Kind == topology.QueueDeclaration && strings.HasPrefix(d.Queue.Name, "q.retry.") {
				n, _ := asInt64(d.Queue.Args["x-message-ttl"])
				rungs[d.Queue.Name] = n
			}
		}
		for _, ms := range m.rungs() {
			if got, ok := rungs[modelRung("q", ms)]; !ok || got != ms {
				t.Errorf("%s: rung for %d ms has TTL %d (declared %v)", sc.Name, ms, got, ok)
			}
		}
	}
}

func TestContractBrokerWaitThreshold(t *testing.T) {
	f := loadContract(t)
	cases := f.BrokerWaitThreshold.Cases
	if len(cases) < 30 {
		t.Errorf("only %d threshold rows; the fixture has 30", len(cases))
	}
	for _, c := range cases {
		name := fmt.Sprintf("threshold=%d/delay=%d", c.ThresholdMillis, c.DelayMillis)
		t.Run(name, func(t *testing.T) {
			want := modelWaitsInBroker(c.ThresholdMillis, c.DelayMillis)
			if c.WaitsInBroker != want {
				t.Errorf("fixture %v, independent derivation %v", c.WaitsInBroker, want)
			}
			p := retry.Fixed(2, msDuration(c.DelayMillis)).WaitInBrokerFrom(msDuration(c.ThresholdMillis))
			if got := acemq.Plan(p).WaitsInBroker(msDuration(c.DelayMillis)); got != want {
				t.Errorf("WaitsInBroker = %v, want %v", got, want)
			}
			// The consumer declares a rung exactly when the wait is held
			// on one; a threshold of 0 declares none (and no acemq.retry).
			var rungs []string
			retryExchange := false
			for _, d := range acemq.ConsumerDeclarations("q", p) {
				if d.Kind == topology.QueueDeclaration && strings.HasPrefix(d.Queue.Name, "q.retry.") {
					rungs = append(rungs, d.Queue.Name)
				}
				if d.Kind == topology.ExchangeDeclaration && d.Exchange.Name == "acemq.retry" {
					retryExchange = true
				}
			}
			if want {
				if !slices.Equal(rungs, []string{modelRung("q", c.DelayMillis)}) || !retryExchange {
					t.Errorf("declared rungs %v (acemq.retry %v), want %s", rungs, retryExchange, modelRung("q", c.DelayMillis))
				}
			} else if len(rungs) > 0 || retryExchange {
				t.Errorf("declared rungs %v (acemq.retry %v) for a consumer wait", rungs, retryExchange)
			}
		})
	}
}

func TestContractNaming(t *testing.T) {
	f := loadContract(t)
	n := f.Naming
	q := n.Queue
	if want := q + ".dlq"; n.DeadLetterQueue != want || contract.DeadLetterQueue(q) != want {
		t.Errorf("dead-letter queue: fixture %q, library %q, want %q", n.DeadLetterQueue, contract.DeadLetterQueue(q), want)
	}
	if want := q + ".parked"; n.ParkedQueue != want || contract.ParkedQueue(q) != want {
		t.Errorf("parked queue: fixture %q, library %q, want %q", n.ParkedQueue, contract.ParkedQueue(q), want)
	}
	if len(n.RetryQueues) == 0 {
		t.Fatal("no rung names")
	}
	for _, r := range n.RetryQueues {
		want := modelRung(q, r.DelayMillis)
		if r.Queue != want {
			t.Errorf("%d ms: fixture %q, independent derivation %q", r.DelayMillis, r.Queue, want)
		}
		if got := contract.RungQueue(q, msDuration(r.DelayMillis)); got != want {
			t.Errorf("RungQueue(%d ms) = %q, want %q", r.DelayMillis, got, want)
		}
	}
}

func TestContractRungArguments(t *testing.T) {
	f := loadContract(t)
	if len(f.RungArguments) == 0 {
		t.Fatal("no rung arguments")
	}
	q := f.Naming.Queue
	for _, r := range f.RungArguments {
		t.Run(r.Queue, func(t *testing.T) {
			if want := modelRung(q, r.DelayMillis); r.Queue != want {
				t.Errorf("fixture names the rung %q, independent derivation %q", r.Queue, want)
			}
			want := map[string]any{
				"x-message-ttl":             r.DelayMillis,
				"x-dead-letter-exchange":    "acemq.retry",
				"x-dead-letter-routing-key": q,
			}
			if !sameArgs(r.Arguments, want) {
				t.Errorf("fixture arguments %v, independent derivation %v", r.Arguments, want)
			}
			// A policy whose one wait is this delay, held on a rung.
			d := msDuration(r.DelayMillis)
			p := retry.Fixed(2, d).WaitInBrokerFrom(d)
			var found bool
			for _, decl := range acemq.ConsumerDeclarations(q, p) {
				if decl.Kind != topology.QueueDeclaration || decl.Queue.Name != r.Queue {
					continue
				}
				found = true
				if !decl.Queue.Durable || decl.Queue.Exclusive || decl.Queue.AutoDelete {
					t.Errorf("rung flags %+v, want durable only", decl.Queue)
				}
				if _, ok := decl.Queue.Args["x-queue-type"]; ok {
					t.Error("a rung carries x-queue-type")
				}
				if !sameArgs(decl.Queue.Args, r.Arguments) {
					t.Errorf("declared arguments %v, fixture %v", decl.Queue.Args, r.Arguments)
				}
			}
			if !found {
				t.Errorf("no rung %q among the consumer's declarations", r.Queue)
			}
		})
	}
}

func TestContractQueueTypeDefaults(t *testing.T) {
	f := loadContract(t)
	d := f.QueueTypeDefaults
	plan := func(q string, opts ...topology.Option) topology.Declaration {
		t.Helper()
		p, err := topology.New().Queue(q, opts...).Plan()
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range p {
			if decl.Kind == topology.QueueDeclaration && decl.Queue.Name == q {
				return decl
			}
		}
		t.Fatalf("no queue %q in the plan", q)
		return topology.Declaration{}
	}
	for _, c := range []struct {
		what, want string
		decl       topology.Declaration
	}{
		{"sourceQueue", d.SourceQueue, plan("a")},
		{"sourceQueueWithDeadLetter", d.SourceQueueWithDeadLetter, plan("a", topology.WithDeadLettering(true))},
		{"explicitClassicQueue", d.ExplicitClassicQueue, plan("a", topology.WithQueueType(topology.QueueClassic))},
		{"explicitClassicQueueWithDeadLetter", d.ExplicitClassicQueueWithDeadLetter, plan("a", topology.WithQueueType(topology.QueueClassic), topology.WithDeadLettering(true))},
		{"deadLetterQueue", d.DeadLetterQueue, consumerQueue(t, "a.dlq")},
		{"parkedQueue", d.ParkedQueue, consumerQueue(t, "a.parked")},
		{"retryRung", d.RetryRung, consumerQueue(t, "a.retry.30s")},
	} {
		if got := queueTypeOf(c.decl.Queue.Args); got != c.want {
			t.Errorf("%s: declared %s, fixture %s", c.what, got, c.want)
		}
		if d.Durability.EveryDeclaredQueueIsDurable && !c.decl.Queue.Durable {
			t.Errorf("%s: not durable", c.what)
		}
	}
}

func consumerQueue(t *testing.T, name string) topology.Declaration {
	t.Helper()
	for _, d := range acemq.ConsumerDeclarations("a", retry.Fixed(2, 30*time.Second)) {
		if d.Kind == topology.QueueDeclaration && d.Queue.Name == name {
			return d
		}
	}
	t.Fatalf("the consumer does not declare %q", name)
	return topology.Declaration{}
}

// queueTypeOf reads a declaration's queue type as the fixture writes it:
// x-queue-type's value, or classic without one. An explicit "classic"
// argument is a defect (classic is the argument's absence).
func queueTypeOf(args map[string]any) string {
	v, ok := args["x-queue-type"]
	if !ok {
		return "classic"
	}
	if s, _ := v.(string); s != "classic" {
		return s
	}
	return "x-queue-type=classic (must be absent)"
}

// sameArgs compares argument tables: same keys, strings equal, integers
// equal whatever their width (JSON numbers included).
func sameArgs(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok {
			return false
		}
		an, aInt := asInt64(av)
		bn, bInt := asInt64(bv)
		switch {
		case aInt || bInt:
			if !aInt || !bInt || an != bn {
				return false
			}
		default:
			if fmt.Sprintf("%T:%v", av, av) != fmt.Sprintf("%T:%v", bv, bv) {
				return false
			}
		}
	}
	return true
}

// asInt64 reads v as an integer of any Go width or as a JSON number holding
// an integer.
func asInt64(v any) (int64, bool) {
	if n, ok := v.(json.Number); ok {
		i, err := n.Int64()
		return i, err == nil
	}
	return wire.Integer(v)
}
