package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acemq/acemq/console"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
)

type listed struct {
	Source string `json:"source"`
	Error  string `json:"error"`
	Queues []struct {
		Name        string   `json:"name"`
		Messages    int      `json:"messages"`
		Consumers   int      `json:"consumers"`
		PublishRate *float64 `json:"publishRate"`
		DeadLetters int      `json:"deadLetters"`
		DLQ         *struct {
			Name     string `json:"name"`
			Messages int    `json:"messages"`
		} `json:"dlq"`
		Rungs []struct {
			Name string `json:"name"`
		} `json:"rungs"`
	} `json:"queues"`
}

// The queue list from a management API: halves and rungs under their
// queue, rates kept, the credentials sent and never shown, server-named
// queues left out.
func TestManagementList(t *testing.T) {
	var auth string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		if r.URL.EscapedPath() != "/api/queues/prod%2Feu" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`[{"name":"orders.new","type":"quorum","messages_ready":4,"consumers":2,"message_stats":{"publish_details":{"rate":12.5},"deliver_get_details":{"rate":11}}},
			{"name":"orders.new.dlq","messages_ready":7},{"name":"orders.new.parked","messages_ready":1},{"name":"orders.new.retry.5s","messages_ready":2},
			{"name":"amq.gen-xyz","messages_ready":0},{"name":"acemq-reply-1b2c","messages_ready":0},{"name":"lonely.dlq","messages_ready":3}]`))
	}))
	defer api.Close()
	conn := brokertest.Connect(t, brokertest.MemoryURL(t))
	mgmt := strings.Replace(api.URL, "http://", "http://ops:s3cret@", 1)
	c := serve(t, conn, console.WithManagement(mgmt, "prod/eu"))
	var l listed
	if st := c.do("GET", "/api/queues", "", &l); st != 200 || l.Source != "management" || len(l.Queues) != 2 {
		t.Fatalf("%d %+v", st, l)
	}
	if auth == "" {
		t.Error("no credentials were sent to the management API")
	}
	o := l.Queues[0]
	if o.Name != "orders.new" || o.Messages != 4 || o.Consumers != 2 || o.PublishRate == nil || *o.PublishRate != 12.5 ||
		o.DeadLetters != 8 || o.DLQ == nil || o.DLQ.Messages != 7 || len(o.Rungs) != 1 || o.Rungs[0].Name != "orders.new.retry.5s" {
		t.Errorf("orders.new: %+v", o)
	}
	if l.Queues[1].Name != "lonely" || l.Queues[1].DeadLetters != 3 {
		t.Errorf("a dead-letter queue without its queue: %+v", l.Queues[1])
	}

	// A management API that fails: the named queues, and the error,
	// without the password.
	api.Close()
	c = serve(t, conn, console.WithManagement(mgmt, "/"), console.WithQueues("orders.new"))
	l = listed{}
	if st := c.do("GET", "/api/queues", "", &l); st != 200 || l.Source != "named" || l.Error == "" || strings.Contains(l.Error, "s3cret") {
		t.Errorf("%d %+v", st, l)
	}
}

// The queue list from RabbitMQ's own management API (rabbitmq_management,
// which .ci/run enables).
func TestManagementRabbitMQ(t *testing.T) {
	url := testenv.AMQPURL(t)
	mgmt := testenv.ManagementURL(t)
	resp, err := http.Get(strings.Replace(mgmt, "guest:guest@", "", 1) + "api/overview")
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("the management API does not answer at %s (rabbitmq-plugins enable rabbitmq_management): %v", mgmt, err)
		}
		t.Skipf("the management API does not answer: %v", err)
	}
	resp.Body.Close()
	f := deadLetters(t, url, 2, 1)
	c := serve(t, f.conn, console.WithManagement(mgmt, "/"))
	// The management API's counts lag (they are sampled every few seconds).
	testenv.Eventually(t, f.queue+" listed with 3 dead letters", func() bool {
		var l listed
		if st := c.do("GET", "/api/queues", "", &l); st != 200 || l.Source != "management" {
			t.Fatalf("%d %+v", st, l)
		}
		for _, q := range l.Queues {
			if q.Name == f.queue {
				return q.DLQ != nil && q.DLQ.Messages == 3 && q.DeadLetters == 3
			}
		}
		return false
	})
}
