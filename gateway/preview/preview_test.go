package preview

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestServeHTTP: the viewer's credentials and identity headers never pass,
// Set-Cookie never comes back, and the safety headers are there, kept as
// hostd set them or added when missing.
func TestServeHTTP(t *testing.T) {
	for _, c := range []struct {
		name     string
		upstream http.Header
		wantCSP  string
	}{
		{"hostd set them", http.Header{"Content-Security-Policy": {"sandbox allow-scripts"}, "Set-Cookie": {"a=b"}}, "sandbox allow-scripts"},
		{"hostd did not", http.Header{"Set-Cookie": {"a=b"}}, DefaultCSP},
	} {
		var seen http.Header
		next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			seen = r.Header.Clone()
			for k, v := range c.upstream {
				w.Header()[k] = v
			}
			w.Write([]byte("page"))
			return nil
		})
		r := httptest.NewRequest("GET", "/preview/pvw-x/", nil)
		for _, h := range []string{"Cookie", "Authorization", "Proxy-Authorization", "Paddock-Identity", "X-Forwarded-User"} {
			r.Header.Set(h, "secret")
		}
		r.Header.Set("Accept", "text/html")
		w := httptest.NewRecorder()
		if err := New().ServeHTTP(w, r, next); err != nil {
			t.Fatal(err)
		}
		for k := range seen {
			if k != "Accept" {
				t.Errorf("%s: %s reached hostd", c.name, k)
			}
		}
		h := w.Result().Header
		if h.Get("Set-Cookie") != "" || h.Get("Content-Security-Policy") != c.wantCSP || h.Get("Referrer-Policy") != "no-referrer" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: answer headers %v", c.name, h)
		}
	}
}

func TestUnmarshalCaddyfile(t *testing.T) {
	for in, wantErr := range map[string]string{
		"paddock_preview":                 "",
		"paddock_preview extra":           "wrong argument count",
		"paddock_preview {\n domain x\n}": "no settings",
	} {
		err := new(Preview).UnmarshalCaddyfile(caddyfile.NewTestDispenser(in))
		if (wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("%q: %v, want %q", in, err, wantErr)
		}
	}
}
