// Package hostguard keeps the library's HTTP surfaces (the console, the
// actuator's endpoints) from answering requests they should not: without a
// token, only requests addressed to a loopback name, which keeps out a
// page that points its own name at 127.0.0.1 (DNS rebinding); with one,
// only requests carrying it.
package hostguard

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// Guard admits requests. The zero value admits requests addressed to a
// loopback name only.
type Guard struct {
	// Name is what the refusals call the server: "this console".
	Name string
	// Token, when set, must be carried by every request, as
	// "Authorization: Bearer Token" (or in the cookie, with Cookie); the
	// Host header is then not checked.
	Token string
	// Cookie, when set, lets a browser carry the token: a request with
	// ?Query=Token sets the cookie (HttpOnly, SameSite=Strict), and a GET
	// of a page (any path not under APIPrefix) is redirected to the same
	// address without the token, so that it leaves the address bar.
	Cookie    string
	Query     string
	APIPrefix string
	// NeedsToken says, in a refusal, how to give the token.
	NeedsToken string
}

// Admit reports whether r may be answered. When it returns false it has
// answered r: 403 for a request to another name without a token, 401 for
// a request without the token, or a redirect taking the token out of the
// address.
func (g Guard) Admit(w http.ResponseWriter, r *http.Request) bool {
	if g.Token == "" {
		if !LoopbackHost(r.Host) {
			http.Error(w, g.Name+" answers only requests addressed to localhost, 127.0.0.1 or [::1]; to serve it to other hosts, start it with a token", http.StatusForbidden)
			return false
		}
		return true
	}
	if g.Cookie != "" && g.Query != "" {
		if q := r.URL.Query().Get(g.Query); q != "" && g.tokenIs(q) {
			http.SetCookie(w, &http.Cookie{Name: g.Cookie, Value: q, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			if r.Method == http.MethodGet && (g.APIPrefix == "" || !strings.HasPrefix(r.URL.Path, g.APIPrefix)) {
				// Take the token out of the address bar and the history.
				u := *r.URL
				v := u.Query()
				v.Del(g.Query)
				u.RawQuery = v.Encode()
				http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
				return false
			}
			return true
		}
	}
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && g.tokenIs(a) {
		return true
	}
	if g.Cookie != "" {
		if k, err := r.Cookie(g.Cookie); err == nil && g.tokenIs(k.Value) {
			return true
		}
	}
	w.Header().Set("WWW-Authenticate", "Bearer")
	http.Error(w, g.Name+" needs its token: "+g.NeedsToken, http.StatusUnauthorized)
	return false
}

func (g Guard) tokenIs(s string) bool {
	return subtle.ConstantTimeCompare([]byte(s), []byte(g.Token)) == 1
}

// LoopbackHost reports whether a Host header (host or host:port) names this
// machine's loopback interface: localhost, or a loopback address.
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return loopbackName(host)
}

// LoopbackAddr reports whether addr (host:port, as given to net.Listen)
// listens on the loopback interface only.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return loopbackName(host)
}

func loopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
