package main

import (
	"time"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/store"
)

// deadLetterRetention is how long the dead-letter store keeps a command
// after it ended: older dead letters are deleted on pruneEvery's schedule,
// with the audit trail and the ended commands. 90 days, as the audit
// trail: long enough to see what a battery device missed over a season.
const deadLetterRetention = 90 * 24 * time.Hour

// deadLetterSource serves the store's dead letters to the API
// (api.DeadLetterSource).
type deadLetterSource struct{ s *store.Store }

// DeadLetters converts the API's query to the store's: the two types have
// the same fields, which this conversion keeps true at compile time.
func (a deadLetterSource) DeadLetters(q api.DeadLetterQuery) ([]devices.DeadLetter, error) {
	return a.s.DeadLetters(store.DeadLetterQuery(q))
}
