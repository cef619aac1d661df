package daemon

import (
	"net/http"
	"strings"

	"paddock.dev/paddock/console"
)

// withConsole serves the web console's static files at console.Path (and
// its bare form, which redirects) and everything else with next. The
// files are public; the page signs in with a token and calls the API
// with it, so the console adds no way in besides the API's own.
func withConsole(next http.Handler) http.Handler {
	h := console.Handler()
	bare := strings.TrimSuffix(console.Path, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == bare || strings.HasPrefix(r.URL.Path, console.Path) {
			h.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
