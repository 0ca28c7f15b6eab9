//go:build !unix

package wsclient

import "time"

func processCPU() time.Duration { return 0 }
