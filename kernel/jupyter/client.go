package jupyter

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zeromq/zmq4"
)

// TooLarge reports whether err is a socket's refusal of a peer's message
// over MaxMessageBytes or MaxFrames. The guard closes that connection, and
// the library does not make it again: a client that wants more from the
// socket dials anew (DialIOPub).
func TooLarge(err error) bool { return errors.Is(err, errFrameTooLarge) }

// DialIOPub makes a new iopub subscription to the kernel ci describes, in
// place of one whose connection was lost. What the kernel publishes before
// it is in place is lost, as for any late subscriber.
func DialIOPub(ctx context.Context, ci *ConnectionInfo, signer *Signer) (*Socket, error) {
	registerTransports()
	sub := zmq4.NewSub(ctx, quiet)
	if err := sub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		sub.Close()
		return nil, fmt.Errorf("subscribe iopub: %w", err)
	}
	if err := sub.Dial(ci.endpoint(ci.IOPubPort)); err != nil {
		sub.Close()
		return nil, fmt.Errorf("connect iopub to %s: %w", ci.endpoint(ci.IOPubPort), err)
	}
	return &Socket{z: sub, signer: signer}, nil
}
