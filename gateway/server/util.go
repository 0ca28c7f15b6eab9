package server

import (
	"errors"
	"io"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func marshalSize(v *structpb.Value) int { return proto.Size(v) }

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
