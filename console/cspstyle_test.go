package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"paddock.dev/paddock/console"
	"paddock.dev/paddock/internal/testutil/browser"
)

// xtermPage serves the console (console.Handler, its CSP and all) and,
// under the same policy, the test page in testdata/xtermcsp/.
func xtermPage(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(console.Path, console.Handler())
	testdata := http.StripPrefix("/testdata/", http.FileServer(http.Dir("testdata/xtermcsp")))
	mux.Handle("/testdata/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", console.CSP)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		testdata.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// xtermLook is what the test page shows: its CSP violations, the first
// row's text, the colours xterm asked for (the theme's foreground on the
// rows, 24-bit red on a cell) and the height of a row.
type xtermLook struct {
	Violations []string `json:"violations"`
	Row        string   `json:"row"`
	RowsColor  string   `json:"rowsColor"`
	RedColor   string   `json:"redColor"`
	RowHeight  float64  `json:"rowHeight"`
}

const xtermLookJS = `(() => {
	const rows = document.querySelector(".xterm-rows");
	const first = rows.firstElementChild;
	const red = [...first.querySelectorAll("span")].find((s) => s.textContent === "RED");
	return {
		violations: window.violations,
		row: first.textContent.replace(/\u00a0/g, " ").trim(),
		rowsColor: getComputedStyle(rows).color,
		redColor: red ? getComputedStyle(red).color : "",
		rowHeight: first.getBoundingClientRect().height,
	};
})()`

func lookAtXterm(t *testing.T, ctx context.Context, url string) xtermLook {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url),
		chromedp.Poll[chromedp.Void](`document.body.dataset.drawn === "1"`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the page did not draw the terminal: %v", err)
	}
	look, err := chromedp.Run(ctx, chromedp.Evaluate[xtermLook](xtermLookJS))
	if err != nil {
		t.Fatal(err)
	}
	return look
}

// TestXtermUnderStrictCSP: xterm.js, with the console's style shim
// (static/cspstyle.js), draws correctly under the console's CSP (no
// 'unsafe-inline'): the theme's colour, a 24-bit colour and the row size
// all apply, and the browser reports no violation at all. Without the
// shim the same page breaks the policy: that half shows the test can see
// a violation, and that the shim is what avoids them.
func TestXtermUnderStrictCSP(t *testing.T) {
	base := xtermPage(t)

	t.Run("shim", func(t *testing.T) {
		ctx := browser.New(t, browser.Options{Timeout: time.Minute})
		look := lookAtXterm(t, ctx, base+"/testdata/index.html")
		if len(look.Violations) != 0 {
			t.Errorf("CSP violations: %q", look.Violations)
		}
		if look.Row != "plain RED" {
			t.Errorf("first row %q, want %q", look.Row, "plain RED")
		}
		if look.RowsColor != "rgb(192, 255, 238)" {
			t.Errorf("rows' colour %q, want the theme's foreground rgb(192, 255, 238)", look.RowsColor)
		}
		if look.RedColor != "rgb(255, 0, 0)" {
			t.Errorf("24-bit red cell's colour %q, want rgb(255, 0, 0)", look.RedColor)
		}
		if look.RowHeight < 8 || look.RowHeight > 40 {
			t.Errorf("a row is %vpx high: xterm's size rules did not apply", look.RowHeight)
		}
		// Disposing of the terminal takes its stylesheets away again.
		sheets, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`(() => { const n = document.adoptedStyleSheets.length; window.term.dispose(); return [n, document.adoptedStyleSheets.length]; })()`))
		if err != nil {
			t.Fatal(err)
		}
		if sheets[0] == 0 || sheets[1] != 0 {
			t.Errorf("adopted stylesheets before and after the terminal's dispose: %v, want some, then none", sheets)
		}
	})

	t.Run("without shim", func(t *testing.T) {
		ctx := browser.New(t, browser.Options{Timeout: time.Minute})
		look := lookAtXterm(t, ctx, base+"/testdata/index.html?noshim")
		var style int
		for _, v := range look.Violations {
			if strings.HasPrefix(v, "style-src") {
				style++
			}
		}
		if style == 0 {
			t.Errorf("no style-src violation without the shim (violations %q): the test cannot tell the shim's work, or xterm no longer needs it", look.Violations)
		}
		if look.RowsColor == "rgb(192, 255, 238)" {
			t.Errorf("the theme's colour applied without the shim")
		}
	})
}
