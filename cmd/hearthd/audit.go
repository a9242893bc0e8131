package main

import (
	"time"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/store"
)

// auditRetention is how long the audit trail of safety-critical commands
// is kept: entries older than that are deleted on pruneEvery's schedule,
// with the ended commands. 90 days covers a quarter's review of who
// opened what.
const auditRetention = 90 * 24 * time.Hour

// auditSource serves the store's audit trail to the API (api.AuditSource).
type auditSource struct{ s *store.Store }

// Audit converts the API's query to the store's: the two types have the
// same fields, which this conversion keeps true at compile time.
func (a auditSource) Audit(q api.AuditQuery) ([]devices.AuditEntry, error) {
	return a.s.Audit(store.AuditQuery(q))
}

// opsSource serves the store's commands to the API (api.OpsSource).
type opsSource struct{ s *store.Store }

// Ops converts the API's query to the store's: the two types have the
// same fields, which this conversion keeps true at compile time.
func (o opsSource) Ops(q api.OpsQuery) ([]devices.Op, bool, error) {
	return o.s.Ops(store.OpsQuery(q))
}
