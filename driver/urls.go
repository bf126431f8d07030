package driver

import "strings"

// SplitURLs splits a comma-separated list of broker URLs (a cluster's
// nodes: "amqp://u:p@node1/,amqp://u:p@node2/"). A comma starts a new URL
// only where a scheme and "://" follow it, spaces around it dropped; any
// other comma belongs to the URL it is in (a password or a vhost may hold
// one). It returns at least one element; a single URL is returned alone.
func SplitURLs(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ',' && startsWithScheme(strings.TrimLeft(s[i+1:], " \t")) {
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	if out == nil {
		return []string{s}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// startsWithScheme reports whether s begins with a URL scheme (a letter,
// then letters, digits, '+', '-' or '.') and "://".
func startsWithScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return strings.HasPrefix(s[i:], "://")
		default:
			return false
		}
	}
	return false
}
