package api

// Port forwarding (GET /v1/forward?port=N): the request asks to switch
// protocols, and after the agent's 101 the stream carries raw bytes to
// and from that TCP port on the sandbox's own loopback.
const (
	// ForwardProtocol is the Upgrade token of a port forward.
	ForwardProtocol = "paddock-tcp"
	// MaxForwards is how many port forwards an agent keeps open at once.
	MaxForwards = 256
)
