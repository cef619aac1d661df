package browser

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserRunsScript: the browser loads a page from loopback and runs
// its script, which changes the page; reading the change back shows the
// script ran in a real browser.
func TestBrowserRunsScript(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/app.js":
			w.Header().Set("Content-Type", "text/javascript")
			fmt.Fprint(w, `document.getElementById("out").textContent = String(6 * 7);`)
		default:
			fmt.Fprint(w, `<!doctype html><p id="out">not run</p><script src="/app.js"></script>`)
		}
	}))
	t.Cleanup(srv.Close)
	ctx := New(t, Options{})
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL)); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Text("#out"))
	if err != nil {
		t.Fatal(err)
	}
	if got != "42" {
		t.Errorf("the page's text: %q, want 42 (its script did not run)", got)
	}
}
