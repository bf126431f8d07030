package acemq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// TestNonsensicalPoliciesAreRefused: a policy built with values that make
// no sense keeps its first mistake, and Consume and Topology.Queue refuse
// it with an error that says what to change.
func TestNonsensicalPoliciesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy retry.Policy
		says   string
	}{
		{"no attempts", retry.Exponential(0, 0, 0), "retry: Exponential(0, 0s, 0s): the number of attempts includes the first, so it must be at least 1"},
		{"negative attempts", retry.Fixed(-1, time.Second), "retry: Fixed(-1, 1s): the number of attempts"},
		{"negative delay", retry.Fixed(3, -time.Second), "the delay must not be negative"},
		{"negative first delay", retry.Exponential(3, -time.Second, time.Minute), "the first delay must not be negative"},
		{"cap below the first delay", retry.Exponential(3, time.Minute, time.Second), "the cap on a delay (1s) is below the first delay (1m0s)"},
		{"negative age", retry.Fixed(3, time.Second).GiveUpAfter(-1), "GiveUpAfter(-1ns): the age limit must not be negative"},
		{"jitter above 1", retry.Fixed(3, time.Second).Jitter(1.5), "Jitter(1.5): the jitter factor must be between 0 (none) and 1"},
		{"negative jitter", retry.Fixed(3, time.Second).Jitter(-0.1), "Jitter(-0.1)"},
		{"negative threshold", retry.Fixed(3, time.Second).WaitInBrokerFrom(-time.Second), "WaitInBrokerFrom(-1s)"},
		{"first mistake kept", retry.Exponential(0, 0, 0).GiveUpAfter(-1), "Exponential(0, 0s, 0s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.policy.Err(); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Err() = %v, want it to say %q", err, tc.says)
			}
			c := memoryBackend.open(t)
			if err := topology.New().Queue("q", acemq.WithRetry(tc.policy)).Validate(); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Topology.Queue: %v", err)
			}
			_, err := acemq.Consume(context.Background(), c, "q", func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() },
				acemq.WithRetry(tc.policy))
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Consume: %v", err)
			}
		})
	}
	for _, p := range []retry.Policy{{}, retry.None(), retry.Fixed(1, 0), retry.Exponential(5, 0, 0), retry.Fixed(2, time.Second).Jitter(1).GiveUpAfter(0).WaitInBrokerFrom(0)} {
		if err := p.Err(); err != nil {
			t.Errorf("%s: Err() = %v, want nil", p, err)
		}
	}
}

// TestNonsensicalOptionsAreRefused: Connect, Consume, NewPublisher and the
// topology builder refuse option values that make no sense, saying what
// to do.
func TestNonsensicalOptionsAreRefused(t *testing.T) {
	ctx := context.Background()
	url := memoryBackend.open(t).URL()
	for _, tc := range []struct {
		opt  acemq.ConnOption
		says string
	}{
		{acemq.WithMaxOutstanding(0), "WithMaxOutstanding(0): at least one publish"},
		{acemq.WithConfirmTimeout(0), "WithConfirmTimeout(0s): the timeout must be positive"},
		{acemq.WithDialTimeout(-time.Second), "WithDialTimeout(-1s)"},
		{acemq.WithEndpointTimeout(0), "WithEndpointTimeout(0s): the timeout must be positive"},
		{acemq.WithFallbackURLs(""), "WithFallbackURLs was given an empty URL"},
		{acemq.WithFallbackURLs("amqp://a b:%zz@x/"), "cannot be parsed"},
		{acemq.WithCredentials(nil), "WithCredentials was given a nil provider"},
	} {
		if c, err := acemq.Connect(ctx, url, tc.opt); err == nil || !strings.Contains(err.Error(), tc.says) {
			if c != nil {
				_ = c.Close(ctx)
			}
			t.Errorf("Connect with a bad option: %v, want it to say %q", err, tc.says)
		}
	}
	for _, bad := range []string{"", "   ", "nosuchscheme://x", "amqp://[::1"} {
		if _, err := acemq.Connect(ctx, bad); err == nil {
			t.Errorf("Connect(%q) did not fail", bad)
		}
	}

	c := memoryBackend.open(t)
	h := func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() }
	for _, tc := range []struct {
		opt  acemq.ConsumeOption
		says string
	}{
		{acemq.WithConcurrency(0), "WithConcurrency(0): at least one handler must run"},
		{acemq.WithPrefetch(-1), "WithPrefetch(-1): the prefetch must be 0 (no limit) or more"},
		{acemq.WithDrainTimeout(0), "WithDrainTimeout(0s): the drain timeout must be positive"},
		{acemq.WithCodec(nil), "WithCodec was given a nil codec"},
	} {
		if _, err := acemq.Consume(ctx, c, "q", h, tc.opt); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Consume with a bad option: %v, want it to say %q", err, tc.says)
		}
	}
	if _, err := acemq.NewPublisher[string](c, "", acemq.WithCodec(nil)).Send(ctx, "q", "x"); err == nil || !strings.Contains(err.Error(), "nil codec") {
		t.Errorf("Send on a publisher built WithCodec(nil): %v", err)
	}

	for _, tc := range []struct {
		topo *topology.Topology
		says string
	}{
		{topology.New().Exchange("x", topology.ExchangeTopic, topology.WithExclusive()), `the exchange "x": WithExclusive does not apply to it`},
		{topology.New().Exchange("x", topology.ExchangeTopic, topology.WithDeadLettering(true)), "WithDeadLettering does not apply"},
		{topology.New().Queue("q", topology.WithInternal()), `the queue "q": WithInternal does not apply to it`},
		{topology.New().Bind("x", "q", "k", topology.WithQueueType(topology.QueueQuorum)), "WithQueueType does not apply"},
		{topology.New().Bind("x", "q", "k", topology.WithDurable(false)), "WithDurable does not apply"},
		{topology.New().Queue("q", topology.WithQueueType(topology.QueueQuorum), topology.WithExclusive()), "cannot be a quorum queue and exclusive"},
	} {
		if err := tc.topo.Validate(); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Validate: %v, want it to say %q", err, tc.says)
		}
	}
	// Arguments apply to all three.
	ok := topology.New().
		Exchange("x", topology.ExchangeHeaders, topology.WithArguments(map[string]any{"alternate-exchange": "y"}), topology.WithDurable(false), topology.WithAutoDelete()).
		Queue("q", topology.WithArguments(map[string]any{"x-message-ttl": 1000}), topology.WithDurable(false), topology.WithExclusive()).
		Bind("x", "q", "", topology.WithArguments(map[string]any{"x-match": "all"}))
	plan, err := ok.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.String(); !strings.Contains(got, "exchange x (headers, transient, auto-delete) alternate-exchange=y") ||
		!strings.Contains(got, "queue q (classic, transient, exclusive) x-message-ttl=1000") || !strings.Contains(got, `binding x -> q on "" x-match=all`) {
		t.Errorf("plan:\n%s", got)
	}
}

// TestArgumentValuesAreChecked: declaration arguments are checked as
// header values are.
func TestArgumentValuesAreChecked(t *testing.T) {
	err := topology.New().Queue("q", topology.WithArguments(map[string]any{"x-message-ttl": make(chan int)})).Validate()
	if err == nil || !strings.Contains(err.Error(), `WithArguments: the argument "x-message-ttl" holds a chan int`) {
		t.Errorf("Validate: %v", err)
	}
	type ttl uint32
	plan, err := topology.New().Queue("q", topology.WithArguments(map[string]any{"x-message-ttl": ttl(500), "x-max-length": uint64(10)})).Plan()
	if err != nil {
		t.Fatal(err)
	}
	if args := queueIn(t, plan, "q").Args; args["x-message-ttl"] != uint32(500) || args["x-max-length"] != int64(10) {
		t.Errorf("arguments %#v", args)
	}
}

// TestFallbackURLsKeepTheScheme: a fallback URL with another scheme is
// refused, since an amqp:// fallback behind amqps:// would connect
// unencrypted.
func TestFallbackURLsKeepTheScheme(t *testing.T) {
	_, err := acemq.Connect(context.Background(), "memory://a", acemq.WithFallbackURLs("amqp://guest:secret@b:5672/"))
	if err == nil || !strings.Contains(err.Error(), "does not have the scheme of memory://a") || strings.Contains(err.Error(), "secret") {
		t.Errorf("Connect with a fallback of another scheme: %v", err)
	}
}

// TestURLListConnects: a comma-separated list in Connect's URL is the
// first URL and its fallbacks; the list keeps one scheme.
func TestURLListConnects(t *testing.T) {
	ctx := context.Background()
	name := testenv.Unique(t, "list")
	c, err := acemq.Connect(ctx, "memory://"+name+",memory://"+name+"-other")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if got := c.Endpoint(); got != "memory://"+name {
		t.Errorf("Endpoint() = %q, want the memory broker of the first URL", got)
	}
	if got := c.URL(); got != "memory://"+name+",memory://"+name+"-other" {
		t.Errorf("URL() = %q, want the list", got)
	}
	if got := c.Health(ctx).Parts["endpoint"]; got != "memory://"+name {
		t.Errorf("the health report's endpoint part is %v", got)
	}
	_, err = acemq.Connect(ctx, "memory://a,amqp://guest:secret@b:5672/")
	if err == nil || !strings.Contains(err.Error(), "does not have the scheme of memory://a") || strings.Contains(err.Error(), "secret") {
		t.Errorf("Connect with a list of two schemes: %v", err)
	}
	_ = c.Close(ctx)
	if got := c.Endpoint(); got != "" {
		t.Errorf("a closed connection reports the endpoint %q", got)
	}
}

// TestOptionsAreCheckedWhereTheyAreTaken: every option is checked by the
// call that takes it (docs: package acemq, Options), never earlier and
// never later: the interceptor and middleware options given nil, a
// negative expiration.
func TestOptionsAreCheckedWhereTheyAreTaken(t *testing.T) {
	ctx := context.Background()
	c := memoryBackend.open(t)
	h := func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() }
	const nilPublish, nilConsume = "WithPublishInterceptors was given a nil interceptor", "WithConsumeInterceptors was given a nil interceptor"

	if _, err := acemq.Connect(ctx, c.URL(), acemq.WithPublishInterceptors(nil)); err == nil || !strings.Contains(err.Error(), nilPublish) {
		t.Errorf("Connect: %v, want it to say %q", err, nilPublish)
	}
	if _, err := acemq.Connect(ctx, c.URL(), acemq.WithConsumeInterceptors(nil)); err == nil || !strings.Contains(err.Error(), nilConsume) {
		t.Errorf("Connect: %v, want it to say %q", err, nilConsume)
	}
	// Interceptors of the other direction are not the consumer's or the
	// publisher's business: each checks its own.
	for _, tc := range []struct {
		opt  acemq.ConsumeOption
		says string
	}{
		{acemq.WithConsumeInterceptors(nil), nilConsume},
		{acemq.WithMiddleware[string](nil), "WithMiddleware was given a nil middleware"},
	} {
		if _, err := acemq.Consume(ctx, c, "q", h, tc.opt); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Consume: %v, want it to say %q", err, tc.says)
		}
	}
	p := acemq.NewPublisher[string](c, "", acemq.WithPublishInterceptors(nil))
	for range 2 { // every Send reports it: building a publisher cannot fail
		if _, err := p.Send(ctx, "q", "x"); err == nil || !strings.Contains(err.Error(), nilPublish) {
			t.Errorf("Send: %v, want it to say %q", err, nilPublish)
		}
	}
	ok := acemq.NewPublisher[string](c, "", acemq.WithPublishInterceptors(func(context.Context, *acemq.Publishing) error { return nil }))
	const negative = "WithExpiration(-1s): a time to live must not be negative"
	if _, err := ok.Send(ctx, "q", "x", acemq.WithExpiration(-time.Second)); err == nil || !strings.Contains(err.Error(), negative) {
		t.Errorf("Send: %v, want it to say %q", err, negative)
	}
	// A later valid value does not hide an earlier mistake of another
	// option, and the last value of one option is the one checked.
	if _, err := acemq.Consume(ctx, c, "q", h, acemq.WithConcurrency(0), acemq.WithConcurrency(2), acemq.WithPrefetch(-1)); err == nil || !strings.Contains(err.Error(), "WithPrefetch(-1)") {
		t.Errorf("Consume: %v, want it to name WithPrefetch(-1)", err)
	}
}
