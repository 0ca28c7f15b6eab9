package arcpruntime_test

import (
	"context"
	"fmt"
	"time"

	"github.com/coder/websocket"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
)

// A runtime on loopback, one session and one echo job, spoken in raw ARCP.
func Example() {
	srv, err := arcpruntime.Listen("127.0.0.1:0", arcpruntime.Options{Tokens: map[string]string{"secret": "alice"}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, srv.URL(), nil)
	if err != nil {
		panic(err)
	}
	defer conn.CloseNow()
	send := func(env *arcp.Envelope) {
		data, _ := arcp.Encode(env)
		if err := conn.Write(ctx, websocket.MessageText, data); err != nil {
			panic(err)
		}
	}
	recv := func() *arcp.Envelope {
		_, data, err := conn.Read(ctx)
		if err != nil {
			panic(err)
		}
		env, err := arcp.Decode(data, arcp.DecodeOptions{RequireSession: true})
		if err != nil {
			panic(err)
		}
		return env
	}

	hello, _ := arcp.New(arcp.TypeHello, "", arcp.Hello{
		Client:       arcp.ClientInfo{Name: "example"},
		Auth:         arcp.Auth{Scheme: "bearer", Token: "secret"},
		Capabilities: arcp.Capabilities{Encodings: []string{"json"}, Features: []string{"ack", "cost.budget"}},
	})
	send(hello)
	welcome := recv()
	w, _ := arcp.DecodePayload[arcp.Welcome](welcome)
	fmt.Println(welcome.Type, w.Capabilities.Features)

	submit, _ := arcp.New(arcp.TypeSubmit, welcome.SessionID, arcp.Submit{Agent: "echo", Input: []byte(`{"hello":"world"}`)})
	send(submit)
	fmt.Println(recv().Type)
	result := recv()
	r, _ := arcp.DecodePayload[arcp.Result](result)
	fmt.Println(result.Type, result.EventSeq, string(r.Result))

	bye, _ := arcp.New(arcp.TypeClose, welcome.SessionID, arcp.Close{})
	send(bye)
	fmt.Println(recv().Type)
	// Output:
	// session.welcome [ack cost.budget]
	// job.accepted
	// job.result 1 {"hello":"world"}
	// session.closed
}
