package session

import (
	"slices"
)

func sortByOpened[C Conn](ss []*Session[C]) {
	slices.SortFunc(ss, func(a, b *Session[C]) int { return a.OpenedAt.Compare(b.OpenedAt) })
}
