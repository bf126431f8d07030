package console

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

// management reads queues from RabbitMQ's management API.
type management struct {
	base       *url.URL // without credentials
	user, pass string
	hasAuth    bool
	vhost      string
	client     *http.Client
}

func newManagement(raw, vhost string) (*management, error) {
	u, err := driver.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("console: WithManagement: %w; expected http://[user:pass@]host:15672/", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("console: WithManagement(%q): expected http://[user:pass@]host:15672/", driver.RedactURL(raw))
	}
	m := &management{vhost: vhost, client: &http.Client{Timeout: 10 * time.Second}}
	if u.User != nil {
		m.user = u.User.Username()
		m.pass, _ = u.User.Password()
		m.hasAuth = true
	}
	u.User = nil
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimSuffix(u.Path, "/")
	m.base = u
	if vhost == "" {
		m.vhost = "/"
	}
	return m, nil
}

// String names the API without credentials.
func (m *management) String() string { return m.base.String() }

// mgmtQueue is the part of a management API queue the console reads.
type mgmtQueue struct {
	Name         string `json:"name"`
	Type         string `json:"type"`
	Messages     int    `json:"messages"`
	Ready        int    `json:"messages_ready"`
	Unacked      int    `json:"messages_unacknowledged"`
	Consumers    int    `json:"consumers"`
	MessageStats struct {
		Publish    rate `json:"publish_details"`
		DeliverGet rate `json:"deliver_get_details"`
		Ack        rate `json:"ack_details"`
	} `json:"message_stats"`
}

type rate struct {
	Rate float64 `json:"rate"`
}

// queues lists the vhost's queues.
func (m *management) queues(ctx context.Context) ([]mgmtQueue, error) {
	query := url.Values{"columns": {"name,type,messages,messages_ready,messages_unacknowledged,consumers,message_stats.publish_details.rate,message_stats.deliver_get_details.rate,message_stats.ack_details.rate"}}.Encode()
	// The vhost is one path segment: "/" is %2F.
	addr := m.base.String() + "/api/queues/" + url.PathEscape(m.vhost) + "?" + query
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
	if err != nil {
		return nil, err
	}
	if m.hasAuth {
		req.SetBasicAuth(m.user, m.pass)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("console: the management API at %s: %w", m, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("console: reading the management API's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("console: the management API at %s answered %s (is the user allowed to monitor the vhost %q?)", m, resp.Status, m.vhost)
	}
	return parseManagementQueues(body)
}

// parseManagementQueues reads the management API's queue list.
func parseManagementQueues(body []byte) ([]mgmtQueue, error) {
	var qs []mgmtQueue
	if err := json.Unmarshal(body, &qs); err != nil {
		return nil, fmt.Errorf("console: the management API's queue list is not what RabbitMQ sends: %w", err)
	}
	return qs, nil
}
