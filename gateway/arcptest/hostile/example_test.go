package hostile_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcptest/hostile"
	"github.com/sessiongate/sessiongate/gateway/wsclient"
)

// Each mode is served at its own path: a client that says hello to the
// handshake-wrong-frame mode is answered with a job.accepted.
func Example() {
	srv, err := hostile.Listen(hostile.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, err := wsclient.Dial(ctx, srv.URL(hostile.ModeHandshakeWrongFrame), wsclient.Options{})
	if err != nil {
		panic(err)
	}
	defer ws.CloseNow()
	hello, _ := arcp.New(arcp.TypeHello, "", arcp.Hello{Client: arcp.ClientInfo{Name: "example"}, Auth: arcp.Auth{Scheme: "bearer"}})
	data, _ := arcp.Encode(hello)
	if err := ws.Write(true, data); err != nil {
		panic(err)
	}
	_, data, err = ws.Read()
	if err != nil {
		panic(err)
	}
	env, err := arcp.Decode(data, arcp.DecodeOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(env.Type)
	// Output: job.accepted
}
