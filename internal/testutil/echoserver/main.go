// Command echoserver is a small HTTP server tests run inside real
// sandboxes (testutil.EchoServerBinary builds it static), to see what a
// server behind a port forward or a preview URL gets and sends:
//
//	/            an HTML page that sets a cookie
//	/echo...     the request as JSON (method, path, query, host, headers, body)
//	/hostile     a page setting headers a preview must strip
//	/redirect    302 to /sub/after; /redirect-abs to http://localhost:<port>/sub/abs
//	/big?n=N     N bytes of a known pattern
//	/ws          a WebSocket echo; its first message is the handshake's headers
//	/json, /json/list, /json/version   DevTools-like documents naming
//	             ws://127.0.0.1:<port>/devtools/page/ABC
//	/devtools/   a WebSocket answering {"id":N,...} with {"id":N,"result":{"path":...}}
//	/static/...  files from the -static directory, when given (a page
//	             and its script a browser test writes into the sandbox)
//	anything else  "sub:" and the path and query, as text
//
// Every request is also appended to -log as one JSON line.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"
)

// Seen is what the server reports of a request.
type Seen struct {
	Method  string              `json:"method"`
	Path    string              `json:"path"`
	RawPath string              `json:"raw_path"`
	Query   string              `json:"query"`
	Host    string              `json:"host"`
	Headers map[string][]string `json:"headers"`
	Body    string              `json:"body"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8000", "listen address")
	logPath := flag.String("log", "", "append every request here as a JSON line")
	staticDir := flag.String("static", "", "serve this directory's files under /static/")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	var mu sync.Mutex
	record := func(s Seen) {
		if *logPath == "" {
			return
		}
		b, _ := json.Marshal(s)
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			f.Write(append(b, '\n'))
			f.Close()
		}
	}
	seen := func(r *http.Request) Seen {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		s := Seen{Method: r.Method, Path: r.URL.Path, RawPath: r.URL.RawPath, Query: r.URL.RawQuery, Host: r.Host, Headers: r.Header, Body: string(body)}
		record(s)
		return s
	}
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		json.NewEncoder(w).Encode(v)
	}
	wsAddr := fmt.Sprintf("127.0.0.1:%d", port)
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		seen(r)
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "guest-cookie", Path: "/"})
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><title>sandbox</title><h1>hello from the sandbox</h1>")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, seen(r)) })
	mux.HandleFunc("/echo/", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, seen(r)) })
	mux.HandleFunc("/hostile", func(w http.ResponseWriter, r *http.Request) {
		seen(r)
		h := w.Header()
		h.Add("Set-Cookie", "a=1; Path=/")
		h.Add("Set-Cookie", "b=2; Path=/; Domain=example.com")
		h.Set("Clear-Site-Data", `"*"`)
		h.Set("Strict-Transport-Security", "max-age=31536000")
		h.Set("NEL", `{"report_to":"x","max_age":86400}`)
		h.Set("Report-To", `{"group":"x","max_age":86400,"endpoints":[{"url":"https://reports.example"}]}`)
		h.Set("Content-Security-Policy", "default-src 'self'")
		h.Set("Referrer-Policy", "unsafe-url")
		h.Set("Cache-Control", "public, max-age=86400")
		h.Set("X-Guest", "kept")
		fmt.Fprint(w, "hostile")
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/sub/after", http.StatusFound)
	})
	mux.HandleFunc("/redirect-abs", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("http://localhost:%d/sub/abs", port), http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		chunk := []byte(strings.Repeat("0123456789abcdef", 4096))
		for n > 0 {
			k := min(n, len(chunk))
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		s := seen(r)
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := context.Background()
		hello, _ := json.Marshal(s)
		if c.Write(ctx, websocket.MessageText, hello) != nil {
			return
		}
		for {
			typ, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			if c.Write(ctx, typ, data) != nil {
				return
			}
		}
	})
	devtools := func(w http.ResponseWriter, r *http.Request) {
		seen(r)
		page := map[string]string{
			"description":          "",
			"devtoolsFrontendUrl":  "/devtools/inspector.html?ws=" + wsAddr + "/devtools/page/ABC",
			"id":                   "ABC",
			"title":                "about:blank",
			"type":                 "page",
			"url":                  "about:blank",
			"webSocketDebuggerUrl": "ws://" + wsAddr + "/devtools/page/ABC",
		}
		if strings.HasPrefix(r.URL.Path, "/json/version") {
			writeJSON(w, map[string]string{"Browser": "FakeChrome/1.0", "Protocol-Version": "1.3",
				"webSocketDebuggerUrl": "ws://" + wsAddr + "/devtools/browser/XYZ"})
			return
		}
		writeJSON(w, []map[string]string{page})
	}
	mux.HandleFunc("/json", devtools)
	mux.HandleFunc("/json/", devtools)
	mux.HandleFunc("/devtools/", func(w http.ResponseWriter, r *http.Request) {
		seen(r)
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := context.Background()
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			var msg struct {
				ID     int    `json:"id"`
				Method string `json:"method"`
			}
			json.Unmarshal(data, &msg)
			out, _ := json.Marshal(map[string]any{"id": msg.ID, "result": map[string]string{"path": r.URL.Path, "method": msg.Method}})
			if c.Write(ctx, websocket.MessageText, out) != nil {
				return
			}
		}
	})
	if *staticDir != "" {
		mux.Handle("/static/", http.StripPrefix("/static/", http.FileServer(http.Dir(*staticDir))))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		seen(r)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "sub:%s?%s", r.URL.Path, r.URL.RawQuery)
	})
	log.Fatal(http.Serve(ln, mux))
}
