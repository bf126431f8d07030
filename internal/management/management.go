// Package management reads what a RabbitMQ virtual host holds from the
// broker's management API (the rabbitmq_management plugin): its queues and
// exchanges. AMQP 0-9-1 cannot list; the acemq command's queue and exchange
// listings, and the operator console's queue list, come from here.
//
// Answers are read as untrusted input: at most MaxAnswer bytes, decoded
// into the few fields used.
package management

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/acemq/acemq/driver"
)

// MaxAnswer bounds the size of one answer of the API.
const MaxAnswer = 64 << 20

// Client reads one virtual host through a management API.
type Client struct {
	base       *url.URL // without credentials, query or trailing slash
	user, pass string
	hasAuth    bool
	vhost      string
	http       *http.Client
}

// New returns a client for the API at rawURL (http://[user:pass@]host:15672/
// or https://…) reading vhost ("" is "/"). The user and password, if any,
// are sent as basic authentication and never shown.
func New(rawURL, vhost string) (*Client, error) {
	u, err := driver.ParseURL(rawURL)
	if err != nil {
		// driver's error says what is wrong without the user information.
		return nil, fmt.Errorf("the management API's URL: %w; expected http://[user:pass@]host:15672/", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the management API's URL %s is not http://[user:pass@]host:15672/", shown(rawURL))
	}
	// A few requests a client: no idle connections kept open after them.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	c := &Client{vhost: vhost, http: &http.Client{Timeout: 10 * time.Second, Transport: tr}}
	if c.vhost == "" {
		c.vhost = "/"
	}
	if u.User != nil {
		c.user = u.User.Username()
		c.pass, _ = u.User.Password()
		c.hasAuth = true
	}
	u.User = nil
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimSuffix(u.Path, "/")
	c.base = u
	return c, nil
}

// shown is rawURL without its password, for an error.
func shown(rawURL string) string {
	if _, err := url.Parse(rawURL); err != nil {
		return "(an unparseable URL)"
	}
	return driver.RedactURL(rawURL)
}

// String names the API without credentials.
func (c *Client) String() string { return c.base.String() }

// Vhost is the virtual host the client reads.
func (c *Client) Vhost() string { return c.vhost }

// Queue is a queue as the API reports it.
type Queue struct {
	Name       string `json:"name"`
	Type       string `json:"type"` // classic, quorum, stream
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"auto_delete"`
	Exclusive  bool   `json:"exclusive"`
	// Messages is Ready and Unacked together; Ready is the messages ready
	// for delivery; Unacked those delivered and not yet settled. The API
	// samples them every few seconds.
	Messages  int `json:"messages"`
	Ready     int `json:"messages_ready"`
	Unacked   int `json:"messages_unacknowledged"`
	Consumers int `json:"consumers"`
	// MessageStats are the queue's rates, in messages a second; zero
	// before the API has sampled any.
	MessageStats struct {
		Publish    Rate `json:"publish_details"`
		DeliverGet Rate `json:"deliver_get_details"`
		Ack        Rate `json:"ack_details"`
	} `json:"message_stats"`
}

// Rate is one of a queue's rates as the API reports it.
type Rate struct {
	Rate float64 `json:"rate"` // messages a second
}

// Exchange is an exchange as the API reports it.
type Exchange struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"auto_delete"`
	Internal   bool   `json:"internal"`
}

// Queues lists the virtual host's queues, in the API's order (by name).
func (c *Client) Queues(ctx context.Context) ([]Queue, error) {
	body, err := c.get(ctx, "queues", "name,type,durable,auto_delete,exclusive,messages,messages_ready,messages_unacknowledged,consumers,"+
		"message_stats.publish_details.rate,message_stats.deliver_get_details.rate,message_stats.ack_details.rate")
	if err != nil {
		return nil, err
	}
	return ParseQueues(body)
}

// Exchanges lists the virtual host's exchanges, in the API's order (by
// name), the nameless default exchange included.
func (c *Client) Exchanges(ctx context.Context) ([]Exchange, error) {
	body, err := c.get(ctx, "exchanges", "name,type,durable,auto_delete,internal")
	if err != nil {
		return nil, err
	}
	return ParseExchanges(body)
}

// ParseQueues reads the API's queue list.
func ParseQueues(body []byte) ([]Queue, error) {
	var qs []Queue
	if err := json.Unmarshal(body, &qs); err != nil {
		return nil, fmt.Errorf("the management API's queue list is not what RabbitMQ sends: %w", err)
	}
	return qs, nil
}

// ParseExchanges reads the API's exchange list.
func ParseExchanges(body []byte) ([]Exchange, error) {
	var xs []Exchange
	if err := json.Unmarshal(body, &xs); err != nil {
		return nil, fmt.Errorf("the management API's exchange list is not what RabbitMQ sends: %w", err)
	}
	return xs, nil
}

// get reads /api/{what}/{vhost}?columns=….
func (c *Client) get(ctx context.Context, what, columns string) ([]byte, error) {
	// The vhost is one path segment: "/" is %2F.
	addr := c.base.String() + "/api/" + what + "/" + url.PathEscape(c.vhost) + "?" + url.Values{"columns": {columns}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
	if err != nil {
		return nil, fmt.Errorf("the management API at %s: %w", c, err)
	}
	if c.hasAuth {
		req.SetBasicAuth(c.user, c.pass)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its URL is c's, said below
		}
		return nil, fmt.Errorf("the management API at %s: %w", c, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("reading the management API's answer: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("the management API at %s answered %s: no virtual host %q", c, resp.Status, c.vhost)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("the management API at %s answered %s (is the user allowed to monitor the virtual host %q?)", c, resp.Status, c.vhost)
	case len(body) > MaxAnswer:
		return nil, fmt.Errorf("the management API at %s answered more than %d bytes", c, MaxAnswer)
	}
	return body, nil
}
