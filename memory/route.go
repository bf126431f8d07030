package memory

import (
	"strings"

	"github.com/acemq/acemq/driver"
)

// splitTopic splits a routing or binding key into words as RabbitMQ does:
// the empty key has no words at all, and empty words between dots count.
func splitTopic(key string) []string {
	if key == "" {
		return nil
	}
	words := strings.Split(key, ".")
	// Consecutive "#" words match the same as one; collapsing them keeps
	// matching linear in the common case.
	out := words[:0:0]
	for i, w := range words {
		if w == "#" && i > 0 && words[i-1] == "#" {
			continue
		}
		out = append(out, w)
	}
	return out
}

// topicMatch reports whether a topic binding key matches a routing key:
// "*" stands for exactly one word and "#" for zero or more.
func topicMatch(pattern, key string) bool {
	return matchWords(splitTopic(pattern), splitTopic(key))
}

func matchWords(p, k []string) bool {
	for len(p) > 0 {
		switch p[0] {
		case "#":
			if len(p) == 1 {
				return true
			}
			for i := 0; i <= len(k); i++ {
				if matchWords(p[1:], k[i:]) {
					return true
				}
			}
			return false
		case "*":
			if len(k) == 0 {
				return false
			}
		default:
			if len(k) == 0 || p[0] != k[0] {
				return false
			}
		}
		p, k = p[1:], k[1:]
	}
	return len(k) == 0
}

// validXMatch lists the x-match values RabbitMQ accepts on a headers binding.
var validXMatch = map[string]bool{"all": true, "any": true, "all-with-x": true, "any-with-x": true}

// headersMatch reports whether a message's headers satisfy a headers
// exchange binding. A binding argument whose value is void matches any
// value of a present header.
func headersMatch(args, headers driver.Table) bool {
	mode := "all"
	if v, ok := args["x-match"].(string); ok {
		mode = v
	}
	withX := strings.HasSuffix(mode, "-with-x")
	anyMode := strings.HasPrefix(mode, "any")
	for k, want := range args {
		if k == "x-match" || (!withX && strings.HasPrefix(k, "x-")) {
			continue
		}
		got, present := headers[k]
		ok := present && (want == nil || equalValues(want, got))
		if anyMode && ok {
			return true
		}
		if !anyMode && !ok {
			return false
		}
	}
	return !anyMode
}

// route returns the queues an exchange routes a message to, each once, in
// binding order.
func (b *broker) route(ex *exchange, key string, headers driver.Table) []*queue {
	var out []*queue
	seen := map[*queue]bool{}
	for _, bd := range ex.bindings {
		if seen[bd.q] {
			continue
		}
		var ok bool
		switch ex.kind {
		case driver.Direct:
			ok = bd.key == key
		case driver.Fanout:
			ok = true
		case driver.Topic:
			ok = topicMatch(bd.key, key)
		case driver.Headers:
			ok = headersMatch(bd.args, headers)
		}
		if ok {
			seen[bd.q] = true
			out = append(out, bd.q)
		}
	}
	return out
}
