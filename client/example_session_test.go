package client_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
)

// The 60-second walkthrough with Session objects: create, exec (buffered
// and streamed), a file, checkpoint and restore, fork into three and
// promote one child. It needs a running daemon, so it has no Output
// comment: go test compiles it but does not run it.
func ExampleClient_NewSession() {
	ctx := context.Background()
	var opts []client.Option
	if ca := os.Getenv("PADDOCK_CA"); ca != "" { // the gateway's own CA, as for the CLI
		roots, err := client.TrustPEM(ca)
		if err != nil {
			log.Fatal(err)
		}
		opts = append(opts, client.WithRootCAs(roots))
	}
	c := client.New(os.Getenv("PADDOCK_URL"), os.Getenv("PADDOCK_TOKEN"), opts...)

	s, err := c.NewSession(ctx, api.CreateRequest{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close() // deletes the session

	r, err := s.Run(ctx, "echo hello > greeting && cat greeting")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.ExitCode, r.Stdout) // 0 hello

	// Output as it comes, over SSE.
	if _, err := s.ExecStream(ctx, api.ExecRequest{Command: "for i in 1 2 3; do echo $i; sleep 1; done"}, os.Stdout, os.Stderr); err != nil {
		log.Fatal(err)
	}

	if _, err := s.Files().Write(ctx, "/workspace/notes.txt", []byte("draft\n"), ""); err != nil {
		log.Fatal(err)
	}
	notes, err := s.Files().Read(ctx, "/workspace/notes.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(notes))

	if _, err := s.Checkpoint(ctx, api.CheckpointRequest{Tag: "before"}); err != nil {
		log.Fatal(err)
	}
	if _, err := s.Run(ctx, "rm greeting"); err != nil {
		log.Fatal(err)
	}
	if _, err := s.Restore(ctx, "before"); err != nil { // greeting is back
		log.Fatal(err)
	}

	kids, err := s.Fork(ctx, 3) // three children of this state
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range kids {
		defer k.Close()
	}
	if _, err := kids[0].Files().Write(ctx, "/workspace/fix.txt", []byte("done\n"), ""); err != nil {
		log.Fatal(err)
	}
	if _, err := kids[0].Promote(ctx, api.PromoteRequest{}); err != nil { // carry its changes to the parent
		log.Fatal(err)
	}
}
