package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// The terminal tab shown now.
const activeTerm = ".term-panel:not([hidden])"

// typeKeys types s into the terminal shown, key by key, as Chrome's own
// input does for a keyboard: rawKeyDown, char, keyUp. (chromedp's plain
// keyDown carries no text, so the char that follows would be typed on top
// of the key xterm.js already took: every letter twice.)
func typeKeys(t *testing.T, ctx context.Context, s string) {
	t.Helper()
	raw := func(p *input.DispatchKeyEventParams) {
		if p.Type == input.DispatchKeyEventTypeKeyDown {
			p.Type = input.DispatchKeyEventTypeRawKeyDown
		}
	}
	if err := chromedp.Do(ctx, chromedp.Focus(activeTerm+" .xterm-helper-textarea"), chromedp.KeyEvent(s, raw)); err != nil {
		t.Fatalf("type %q: %v", s, err)
	}
}

// screenRowsJS is the text of the rows of the terminal shown, one string a
// row, as xterm.js drew them.
const screenRowsJS = `[...document.querySelectorAll("` + activeTerm + ` .xterm-rows > div")].map((r) => r.textContent.replace(/\u00a0/g, " ").trimEnd())`

// waitRow waits until the terminal shown has a row that is exactly want.
func waitRow(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	js := fmt.Sprintf(`%s.includes(%q)`, screenRowsJS, want)
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		rows, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](screenRowsJS))
		t.Fatalf("no row %q in the terminal (%v); it shows:\n%s", want, err, strings.TrimRight(strings.Join(rows, "\n"), "\n"))
	}
}

// termState is what the terminal shown says about itself.
type termState struct {
	State    string `json:"state"`
	Status   string `json:"status"`
	Cols     string `json:"cols"`
	Rows     string `json:"rows"`
	ExitCode string `json:"exitCode"`
	Tabs     int    `json:"tabs"`
}

const termStateJS = `(() => {
	const p = document.querySelector("` + activeTerm + `");
	if (!p) return {};
	const s = p.querySelector(".term-screen");
	return {state: p.dataset.state || "", status: p.querySelector(".term-status").textContent,
		cols: s.dataset.cols || "", rows: s.dataset.rows || "", exitCode: s.dataset.exitCode || "",
		tabs: document.querySelectorAll(".term-tab").length};
})()`

// waitState waits until the terminal shown is in state (open, exited, …).
func waitState(t *testing.T, ctx context.Context, state string) termState {
	t.Helper()
	js := fmt.Sprintf(`document.querySelector(%q)?.dataset.state === %q`, activeTerm, state)
	err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(30*time.Second)))
	st, err2 := chromedp.Run(ctx, chromedp.Evaluate[termState](termStateJS))
	if err != nil || err2 != nil {
		t.Fatalf("the terminal is not %s (%v, %v): %+v", state, err, err2, st)
	}
	return st
}

// watchCSP records the page's CSP violations from now on.
func watchCSP(t *testing.T, ctx context.Context) {
	t.Helper()
	js := `window.cspViolations = []; document.addEventListener("securitypolicyviolation", (e) => window.cspViolations.push(e.violatedDirective + " " + e.blockedURI)); true`
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
		t.Fatal(err)
	}
}

func cspViolations(t *testing.T, ctx context.Context) []string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.cspViolations`))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// terminalScenario drives the terminal that was just opened on session id
// (its first tab): type and read, resize, two tabs, an exit code, a close.
// shootNarrow takes the screenshot of the page 400 px wide, shoot the one
// with both tabs.
func terminalScenario(t *testing.T, ctx context.Context, c *client.Client, id string, shootNarrow, shoot func()) {
	first := waitState(t, ctx, "open")

	// Type a line and see the shell's answer (not the echo of the line).
	typeKeys(t, ctx, "echo hi-$((6*7))\n")
	waitRow(t, ctx, "hi-42")

	// A paste larger than the daemon takes in one message (1 MiB) arrives
	// whole: the page sends it in parts. (Raw mode: a line in the
	// terminal's usual mode holds at most 4 KiB.)
	typeKeys(t, ctx, "stty raw -echo; printf 'raw-%s\\r\\n' on; head -c 1300000 | wc -c; stty sane\n")
	waitRow(t, ctx, "raw-on")
	if _, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: strings.Repeat("0123456789", 130000)}); err != nil {
		t.Fatal(err)
	}
	waitRow(t, ctx, "1300000")

	// Resize the window to a phone's width: the terminal follows it, and
	// the shell is told.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(400, 700)); err != nil {
		t.Fatal(err)
	}
	js := fmt.Sprintf(`(() => { const s = document.querySelector(%q); return s.dataset.cols !== %q && s.dataset.rows !== %q; })()`,
		activeTerm+" .term-screen", first.Cols, first.Rows)
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the terminal kept its size %sx%s after the window shrank: %v", first.Cols, first.Rows, err)
	}
	small := waitState(t, ctx, "open")
	if small.Status != fmt.Sprintf("Connected: %s×%s.", small.Cols, small.Rows) {
		t.Errorf("status after the resize: %q, want the new size %s×%s", small.Status, small.Cols, small.Rows)
	}
	typeKeys(t, ctx, "stty size\n")
	waitRow(t, ctx, small.Rows+" "+small.Cols)
	if right, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelector(".terminals").getBoundingClientRect().right`)); err != nil || right > 400 {
		t.Errorf("the terminal strip reaches x=%v in a 400 px window (%v)", right, err)
	}
	shootNarrow()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}

	// A second tab is a second shell: a variable set in the first is not
	// set there, and is still set in the first.
	typeKeys(t, ctx, "C3VAR=alpha-$((2+3))\n")
	if err := chromedp.Do(ctx, chromedp.Click(".term-new")); err != nil {
		t.Fatal(err)
	}
	if st := waitState(t, ctx, "open"); st.Tabs != 2 {
		t.Fatalf("%d tabs after New terminal, want 2", st.Tabs)
	}
	typeKeys(t, ctx, "echo \"v=[${C3VAR:-unset}]\"\n")
	waitRow(t, ctx, "v=[unset]")
	if err := chromedp.Do(ctx, chromedp.Click(`.term-tab[id$="-1-tab"]`)); err != nil {
		t.Fatal(err)
	}
	typeKeys(t, ctx, "echo \"v=[$C3VAR]\"\n")
	waitRow(t, ctx, "v=[alpha-5]")

	// Keyboard: Shift+Tab leaves the terminal for its tab; the arrow key
	// moves to the next tab.
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\t", chromedp.KeyModifiers(chromedp.ModifierShift))); err != nil {
		t.Fatal(err)
	}
	if f, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id`)); err != nil || !strings.HasSuffix(f, "-1-tab") {
		t.Errorf("focus after Shift+Tab in the terminal: %q (%v), want its tab", f, err)
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
		t.Fatal(err)
	}
	if f, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.id + " " + document.activeElement.getAttribute("aria-selected")`)); err != nil || !strings.HasSuffix(f, "-2-tab true") {
		t.Errorf("focus after ArrowRight on tab 1: %q (%v), want tab 2, selected", f, err)
	}

	// The second shell exits with 3: its tab says so, and stays.
	typeKeys(t, ctx, "exit 3\n")
	exited := waitState(t, ctx, "exited")
	if exited.Status != "The shell exited with code 3." || exited.ExitCode != "3" {
		t.Errorf("after exit 3: status %q, exit code %q", exited.Status, exited.ExitCode)
	}
	shoot()

	// Closing the first tab hangs up its shell: the daemon ledgers both
	// ends, the exit (3) and the close from the console.
	if err := chromedp.Do(ctx, chromedp.Click(`.term-close[aria-label="Close Terminal 1"]`)); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, c, id, 1, 1)
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".term-tab").length`)); err != nil || n != 1 {
		t.Errorf("%d tabs after closing one of 2 (%v)", n, err)
	}

	// Leaving the panel for another page hangs up the shells left open.
	if err := chromedp.Do(ctx, chromedp.Click(".term-new")); err != nil {
		t.Fatal(err)
	}
	waitState(t, ctx, "open")
	if err := chromedp.Do(ctx, chromedp.Navigate(consoleBase(t)+"/console/#/sessions")); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, c, id, 1, 2)
}

// waitEnded waits until session id's ledger has exits pty.close entries
// that say the shell exited (with code 3) and clients that say the console
// hung up.
func waitEnded(t *testing.T, c *client.Client, id string, exits, clients int) {
	t.Helper()
	ended := map[string]int{}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		entries, err := c.Events(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		clear(ended)
		for _, e := range entries {
			if e.Kind != "pty.close" {
				continue
			}
			var d struct {
				Ended    string `json:"ended"`
				ExitCode *int   `json:"exit_code"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			if d.Ended == "exit" && (d.ExitCode == nil || *d.ExitCode != 3) {
				t.Fatalf("pty.close %s", e.Data)
			}
			ended[d.Ended]++
		}
		if ended["exit"] == exits && ended["client"] == clients {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pty.close entries by how they ended: %v, want exit (code 3) %d and client %d", ended, exits, clients)
		}
	}
}

// openTerminalTab opens session id's panel and its terminal: the
// panel's control named Terminal, Terminals or Open terminal (the tab of
// the panel, or the skeleton's button).
func openTerminalTab(t *testing.T, ctx context.Context, base, id string) {
	t.Helper()
	const click = `(() => {
		const c = [...document.querySelectorAll("#main button, #main [role=tab], #main a")]
			.find((e) => /^(open )?terminals?$/i.test(e.textContent.trim()));
		if (!c) return false;
		c.click();
		return true;
	})()`
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/console/#/sessions/"+id),
		chromedp.Poll[chromedp.Void](click, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.WaitVisible(chromedp.CSS(activeTerm+" .term-screen"))); err != nil {
		t.Fatalf("open the terminal of %s: %v", id, err)
	}
}

// TestTerminal drives the console's terminal in a real Chromium through
// the real gateway (TLS) to a real daemon and procbox sandbox: typing and
// reading the answer, a paste over 1 MiB, resizing the window to 400 px
// (stty size follows), the keyboard, two tabs that are two shells, exit 3
// shown as such, a closed tab's shell and those of a page left behind hung
// up (pty.close in the ledger), and not one CSP violation or page error on
// the way. Then the other ends, limits and refusals: a session deleted
// under its terminal, at most 8 tabs, a session that refuses terminals and
// a session token each show the daemon's reason.
// (A ticket's single use is proven at the API, hostd/api.TestPTYTicket,
// and through the gateway, cmd/paddock.TestCLIGateway/terminal.)
func TestTerminal(t *testing.T) {
	ctx, d, base := startConsole(t)
	bg := context.Background()
	s, err := d.Client.CreateSession(bg, api.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	errs := pageErrors(t, ctx)
	signIn(t, ctx, d.Token)
	watchCSP(t, ctx)

	openTerminalTab(t, ctx, base, s.ID)
	terminalScenario(t, ctx, d.Client, s.ID, func() { shot(t, ctx, "terminal-narrow") }, func() { shot(t, ctx, "terminal") })
	if v := cspViolations(t, ctx); len(v) != 0 {
		t.Errorf("CSP violations on the terminal page: %q", v)
	}
	if e := errs(); len(e) != 0 {
		t.Errorf("the page logged errors: %q", e)
	}

	t.Run("refused", func(t *testing.T) {
		ten := int64(10)
		b, err := d.Client.CreateSession(bg, api.CreateRequest{Budget: &api.Budget{MaxExecs: &ten}})
		if err != nil {
			t.Fatal(err)
		}
		openTerminalTab(t, ctx, base, b.ID)
		st := waitState(t, ctx, "failed")
		if !strings.HasPrefix(st.Status, "Could not open a terminal: ") || !strings.Contains(st.Status, "budget") {
			t.Errorf("a session with a budget on commands: %q, want the daemon's refusal", st.Status)
		}
	})

	// A terminal that ends without an exit code says why: here its session
	// is deleted under it (the daemon closes with 1011 and a reason).
	t.Run("session deleted", func(t *testing.T) {
		gone, err := d.Client.CreateSession(bg, api.CreateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		openTerminalTab(t, ctx, base, gone.ID)
		waitState(t, ctx, "open")
		if err := d.Client.DeleteSession(bg, gone.ID); err != nil {
			t.Fatal(err)
		}
		st := waitState(t, ctx, "closed")
		if !strings.HasPrefix(st.Status, "The terminal closed: the sandbox ended the terminal without an exit code") || !strings.HasSuffix(st.Status, "(code 1011).") || st.ExitCode != "" {
			t.Errorf("after the session's delete: %+v", st)
		}
	})

	// One strip opens at most 8 terminals (the most the daemon lets one
	// tenant have): New terminal is then disabled, and says why.
	t.Run("at most 8", func(t *testing.T) {
		openTerminalTab(t, ctx, base, s.ID)
		waitState(t, ctx, "open")
		for i := 2; i <= 8; i++ {
			if err := chromedp.Do(ctx, chromedp.Click(".term-new")); err != nil {
				t.Fatal(err)
			}
			waitState(t, ctx, "open")
		}
		const js = `[document.querySelectorAll(".term-tab").length, document.querySelector(".term-new").disabled, document.querySelector(".term-limit").textContent]`
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]any](js))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != "[8 true At most 8 terminals at once: close one to open another.]" {
			t.Errorf("after 8 terminals: %v", got)
		}
		// A click on the disabled button opens nothing.
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector(".term-new").click(), true`)); err != nil {
			t.Fatal(err)
		}
		if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".term-tab").length`)); n != 8 {
			t.Errorf("%d tabs after clicking New terminal at the limit", n)
		}
		// Closing one opens the way again.
		if err := chromedp.Do(ctx, chromedp.Click(`.term-close[aria-label="Close Terminal 8"]`)); err != nil {
			t.Fatal(err)
		}
		if dis, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector(".term-new").disabled`)); dis {
			t.Error("New terminal still disabled with 7 open")
		}
	})

	// A session token never opens a terminal (a shell runs anything): the
	// console shows the API's 403 and no terminal opens.
	t.Run("session token", func(t *testing.T) {
		st, err := d.Client.MintToken(bg, s.ID, api.TokenRequest{Ops: []string{"read"}, TTLSeconds: 600})
		if err != nil {
			t.Fatal(err)
		}
		before := countKind(t, d.Client, s.ID, "pty.open")
		signIn(t, ctx, st.Token)
		openTerminalTab(t, ctx, base, s.ID)
		got := waitState(t, ctx, "failed")
		if !strings.HasPrefix(got.Status, "Could not open a terminal: ") || !strings.Contains(got.Status, "session token") {
			t.Errorf("a session token's terminal: %q, want the API's refusal", got.Status)
		}
		if after := countKind(t, d.Client, s.ID, "pty.open"); after != before {
			t.Errorf("pty.open entries went from %d to %d", before, after)
		}
	})
}

// countKind counts session id's ledger entries of kind.
func countKind(t *testing.T, c *client.Client, id, kind string) int {
	t.Helper()
	entries, err := c.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Kind == kind {
			n++
		}
	}
	return n
}
