package fake_test

import (
	"context"
	"fmt"
	"net"
	"os"

	"paddock.dev/paddock/guest/api"
	"paddock.dev/paddock/guest/client"
	"paddock.dev/paddock/hypervisor"
	"paddock.dev/paddock/hypervisor/fake"
)

// A test builds the backend on a directory of its own and talks to a
// machine's agent as the daemon does, through Dial.
func Example() {
	dir, err := os.MkdirTemp("", "fake-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	b := fake.New(dir)
	defer b.Close()
	ctx := context.Background()
	m, err := b.Create(ctx, hypervisor.MachineSpec{Image: "any"})
	if err != nil {
		panic(err)
	}
	c := client.New(func(ctx context.Context) (net.Conn, error) { return m.Dial(ctx) })
	defer c.Close()
	if _, err := c.WriteFile(ctx, api.FileContent{Path: "/workspace/greeting", Content: []byte("hello")}); err != nil {
		panic(err)
	}
	res, err := c.Exec(ctx, api.ExecRequest{Command: api.Command{Shell: "cat greeting", Cwd: "/workspace"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.Stdout), b.Capabilities().Isolation)
	// Output: hello none
}
