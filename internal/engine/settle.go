package engine

import (
	"strconv"
	"unicode/utf8"

	"github.com/acemq/acemq/driver"
)

// CutReason returns reason cut to max bytes on a UTF-8 boundary, marked
// with its full length: the x-acemq-error of a set-aside copy must fit in
// the one frame its headers travel in.
func CutReason(reason string, max int) string {
	if len(reason) <= max {
		return reason
	}
	mark := "… (cut; the reason was " + strconv.Itoa(len(reason)) + " bytes)"
	n := max - len(mark)
	for n > 0 && !utf8.RuneStart(reason[n]) {
		n--
	}
	return reason[:n] + mark
}

// Copy is the copy of delivery d the consume engine republishes to queue
// through the default exchange (a retry, a set-aside, an in-progress put
// back): d's body, content type, correlation id, reply-to and priority,
// with headers; mandatory and always confirmed. Its message id is d's, or
// id when d has none.
func Copy(d *driver.Delivery, queue string, headers driver.Table, id string) driver.Message {
	m := driver.Message{
		Exchange:      "",
		RoutingKey:    queue,
		Mandatory:     true,
		AlwaysConfirm: true,
		ContentType:   d.ContentType,
		MessageID:     d.MessageID,
		CorrelationID: d.CorrelationID,
		ReplyTo:       d.ReplyTo,
		Priority:      d.Priority,
		Headers:       headers,
		Body:          d.Body,
	}
	if m.MessageID == "" {
		m.MessageID = id
	}
	return m
}
