package console

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// The parts of a reason that differ between messages failing for the same
// cause: ids, numbers and quoted values.
var (
	uuidRE   = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	hexRE    = regexp.MustCompile(`(?i)\b(?:0x)?[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*\b|\b(?:0x)?[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*\b`)
	numberRE = regexp.MustCompile(`\d+(?:\.\d+)?`)
	// A single-quoted value starts after a space or punctuation, so that
	// the apostrophes of "can't" and "user's" are not quotes.
	quoteRE = regexp.MustCompile(`"[^"]*"|(?:^|[\s(\[{=:,])'[^']*'`)
)

// noReason is the group key of messages without a reason.
const noReason = "(no reason given)"

// GroupKey is the key dead letters are grouped by: the reason (x-acemq-error,
// prose for operators, docs/wire.md §6.2; nothing is read out of it) with what
// varies between messages failing for the same cause — UUIDs and other
// hexadecimal ids of 8 or more digits (<id>), numbers (<n>) and quoted
// values ("…") — replaced, and space collapsed. So "InvalidOrderError: order
// o-4 is not valid: quantity -5" and "… order o-9 … quantity -2" are one
// group, "InvalidOrderError: order o-4 is not valid: quantity -5" and
// "UnknownSKUError: no price for SKU X" are two. A message without a reason
// is in the group "(no reason given)".
func GroupKey(reason string) string {
	r := strings.Join(strings.Fields(reason), " ")
	if r == "" {
		return noReason
	}
	r = quoteRE.ReplaceAllStringFunc(r, func(q string) string {
		if q[0] == '"' {
			return `"…"`
		}
		lead, _, _ := strings.Cut(q, "'")
		return lead + "'…'"
	})
	r = uuidRE.ReplaceAllString(r, "<id>")
	r = hexRE.ReplaceAllStringFunc(r, func(h string) string {
		if len(strings.TrimPrefix(strings.ToLower(h), "0x")) >= 8 {
			return "<id>"
		}
		return h
	})
	return numberRE.ReplaceAllString(r, "<n>")
}

// groupID is the short, URL-safe name of a group key.
func groupID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}
