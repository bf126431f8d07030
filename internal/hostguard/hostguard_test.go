package hostguard

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LocalHost:80": true, "127.0.0.1": true, "127.0.0.1:9464": true, "127.1.2.3:1": true, "[::1]:8484": true, "[::1]": true, "::1": true,
		"": false, "example.com": false, "localhost.example.com": false, "127.0.0.1.nip.io": false, "0.0.0.0:80": false, "[::]:80": false, "10.0.0.1": false, "[::ffff:10.0.0.1]:80": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %t, want %t", host, got, want)
		}
	}
}

// The cookie form: ?token= sets the cookie and redirects a page's GET
// without it; an API call with it is answered; the cookie then admits.
func TestCookieToken(t *testing.T) {
	g := Guard{Name: "this thing", Token: "tok", Cookie: "c", Query: "token", APIPrefix: "/api/", NeedsToken: "say it"}
	admit := func(target string, cookie string) (bool, *httptest.ResponseRecorder) {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		req.Host = "far.example"
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "c", Value: cookie})
		}
		rec := httptest.NewRecorder()
		return g.Admit(rec, req), rec
	}
	ok, rec := admit("/page?token=tok&x=1", "")
	if ok || rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/page?x=1" || len(rec.Result().Cookies()) != 1 {
		t.Errorf("?token on a page: %v %d %q", ok, rec.Code, rec.Header().Get("Location"))
	}
	if ok, _ := admit("/api/x?token=tok", ""); !ok {
		t.Error("?token on the API was refused")
	}
	if ok, _ := admit("/page", "tok"); !ok {
		t.Error("the cookie was refused")
	}
	if ok, rec := admit("/page?token=nope", "nope"); ok || rec.Code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %v %d", ok, rec.Code)
	}
}
