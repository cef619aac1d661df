package agent_test

import (
	"net"
	"net/http"
	"testing"
	"time"

	"paddock.dev/paddock/guest/agent"
	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
)

// TestReviewForwardSlotHeldAfterClientCloses: hostd never half-closes a
// forward (its ReverseProxy and transport close the whole stream), but
// when the stream to the agent ends the agent only half-closes the
// sandbox side and then waits for the sandbox's server to write or close.
// A server that does neither (an idle WebSocket, a long poll, a hostile
// app) keeps the agent's forward slot forever: after api.MaxForwards such
// forwards were opened and closed by the client, the agent refuses every
// new forward (409) for good, so the session's previews stop working.
func TestReviewForwardSlotHeldAfterClientCloses(t *testing.T) {
	// The agent gives the sandbox side this long to finish once the
	// client has gone (30 s by default), then frees the slot.
	agent.SetForwardDrainTimeout(t, 500*time.Millisecond)
	a := startAgent(t, nil)
	// A server that accepts and then neither reads, writes nor closes.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	ctx := ctxFor(t)
	for i := 0; i < api.MaxForwards; i++ {
		c, err := a.c.DialPort(ctx, port)
		if err != nil {
			t.Fatalf("forward %d: %v", i, err)
		}
		c.Close() // the client is gone, entirely
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := a.c.DialPort(ctx, port)
		if err == nil {
			c.Close()
			return
		}
		if !client.IsStatus(err, http.StatusConflict) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("every client closed its forward 5 s ago, yet the agent still holds all %d slots: %v", api.MaxForwards, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
