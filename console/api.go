package console

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/acemq/acemq"
)

// apiRoute is a parsed /api/ path.
type apiRoute struct {
	kind  string // queues, events, queue, message, replay, delete, export
	queue string
	id    string
}

// parseAPIPath splits an escaped /api/… path; queue names and ids are path
// segments, percent-encoded.
func parseAPIPath(escaped string) (apiRoute, bool) {
	rest, ok := strings.CutPrefix(escaped, "/api/")
	if !ok {
		return apiRoute{}, false
	}
	parts := strings.Split(rest, "/")
	seg := make([]string, len(parts))
	for i, p := range parts {
		s, err := url.PathUnescape(p)
		if err != nil {
			return apiRoute{}, false
		}
		seg[i] = s
	}
	switch {
	case len(seg) == 1 && seg[0] == "queues":
		return apiRoute{kind: "queues"}, true
	case len(seg) == 1 && seg[0] == "events":
		return apiRoute{kind: "events"}, true
	case len(seg) < 2 || seg[0] != "queues" || seg[1] == "":
		return apiRoute{}, false
	case len(seg) == 2:
		return apiRoute{kind: "queue", queue: seg[1]}, true
	case len(seg) == 3 && (seg[2] == "replay" || seg[2] == "delete" || seg[2] == "export"):
		return apiRoute{kind: seg[2], queue: seg[1]}, true
	case len(seg) == 4 && seg[2] == "messages" && seg[3] != "":
		return apiRoute{kind: "message", queue: seg[1], id: seg[3]}, true
	}
	return apiRoute{}, false
}

// serveAPI answers /api/. Every call but the event stream must carry the
// console's cross-site guard header, which a page of another site cannot
// set; actions are POSTs, and refused when the browser says they come from
// another site.
func (c *Console) serveAPI(w http.ResponseWriter, r *http.Request) {
	rt, ok := parseAPIPath(r.URL.EscapedPath())
	if !ok {
		apiError(w, http.StatusNotFound, errors.New("no such API path; see docs/console.md"))
		return
	}
	action := rt.kind == "replay" || rt.kind == "delete" || rt.kind == "export"
	want := http.MethodGet
	if action {
		want = http.MethodPost
	}
	if r.Method != want {
		w.Header().Set("Allow", want)
		apiError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s is not allowed: use %s", r.Method, r.URL.Path, want))
		return
	}
	if rt.kind != "events" {
		if h := r.Header.Get(csrfHeader); h == "" || !equal(h, c.csrf) {
			apiError(w, http.StatusForbidden, fmt.Errorf("the request lacks the console's %s header: the console's own page sends it; a page from another site cannot", csrfHeader))
			return
		}
		if site := r.Header.Get("Sec-Fetch-Site"); action && site != "" && site != "same-origin" && site != "none" {
			apiError(w, http.StatusForbidden, errors.New("actions are accepted only from the console's own page"))
			return
		}
	}
	ctx := r.Context()
	switch rt.kind {
	case "queues":
		writeJSON(w, http.StatusOK, c.listQueues(ctx))
	case "events":
		c.serveEvents(w, r)
	case "queue":
		v, err := c.view(ctx, rt.queue)
		if err != nil {
			apiError(w, statusOf(err), err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	case "message":
		d, found, err := c.detail(ctx, rt.queue, rt.id)
		switch {
		case err != nil:
			apiError(w, statusOf(err), err)
		case !found:
			apiError(w, http.StatusNotFound, fmt.Errorf("no message %s on %s now (replayed, deleted, or beyond the first %d messages)", rt.id, rt.queue, c.cfg.peekLimit))
		default:
			writeJSON(w, http.StatusOK, d)
		}
	case "replay", "delete":
		s, err := readSelection(r.Body)
		if err != nil {
			apiError(w, http.StatusBadRequest, err)
			return
		}
		// An action runs to its end even when the page that asked goes
		// away (a closed tab would otherwise stop a replay half-way: safe,
		// but not what was asked), within actionTimeout.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), actionTimeout)
		defer cancel()
		ctx = actx
		var res actionResult
		if rt.kind == "replay" {
			res, err = c.replay(ctx, rt.queue, s)
		} else {
			res, err = c.remove(ctx, rt.queue, s)
		}
		if err != nil {
			apiError(w, statusOf(err), err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	case "export":
		s, err := readSelection(r.Body)
		if err != nil {
			apiError(w, http.StatusBadRequest, err)
			return
		}
		ew := &exportWriter{w: w, name: exportName(rt.queue)}
		n, err := c.export(ctx, ew, rt.queue, s)
		switch {
		case err != nil && !ew.started:
			apiError(w, statusOf(err), err)
		case err != nil:
			// Part of the file is sent: break the response off, so that the
			// download fails rather than ends short.
			panic(http.ErrAbortHandler)
		case !ew.started:
			w.Header().Set(exportedHeader, "0")
			ew.start(false)
		default:
			w.Header().Set(exportedHeader, fmt.Sprint(n)) // a trailer
		}
	}
}

// exportedHeader carries an export's count: a trailer, after the lines,
// when there are any (the count is known only at the end), a header when
// there are none.
const exportedHeader = "X-Acemq-Exported"

// exportWriter streams an export to its response, sending the headers
// with the first line.
type exportWriter struct {
	w       http.ResponseWriter
	name    string
	started bool
}

func (e *exportWriter) start(trailer bool) {
	e.started = true
	h := e.w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Content-Disposition", `attachment; filename="`+e.name+`"`)
	h.Set("Cache-Control", "no-store")
	if trailer {
		h.Set("Trailer", exportedHeader)
	}
	e.w.WriteHeader(http.StatusOK)
}

func (e *exportWriter) Write(p []byte) (int, error) {
	if !e.started {
		e.start(true)
	}
	return e.w.Write(p)
}

// actionTimeout bounds a replay or a delete.
const actionTimeout = 30 * time.Minute

// serveEvents streams the queue list as server-sent events, one "queues"
// event every interval, until the client goes or the console closes.
func (c *Console) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		apiError(w, http.StatusInternalServerError, errors.New("the server cannot stream"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	t := time.NewTicker(c.cfg.interval)
	defer t.Stop()
	for {
		b, err := json.Marshal(c.listQueues(r.Context()))
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "event: queues\ndata: %s\n\n", b); err != nil {
			return
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		case <-t.C:
		}
	}
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// statusOf maps a library error to an HTTP status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, acemq.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, acemq.ErrUnsupported):
		return http.StatusNotImplemented
	case errors.As(err, new(*requestError)):
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}

// requestError is a request the console refuses as asked.
type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func apiError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}
