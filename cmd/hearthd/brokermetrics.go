package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hearthd/hearth/broker"
)

// brokerMetrics counts what the embedded broker refused, for /metrics:
//
//	hearth_broker_refused_connects_total{reason}  CONNECTs refused: rate, max_connections,
//	                                              credentials, not_authorized, login_failures, other
//	hearth_broker_refused_publishes_total          PUBLISHes and wills the ACL refused
//	hearth_broker_limit_closes_total{reason}       connections closed by the limits before
//	                                              authentication (connect_timeout, bad_first_packet,
//	                                              max_unauthenticated) or for silence (keepalive)
//	hearth_broker_unauthenticated_connections      connections open and not yet admitted
//	hearth_broker_publishers_slowed_total          episodes of a publisher slowed at its cap of
//	                                              commands not yet stored (reads paused)
//	hearth_broker_commands_nacked_total            commands the store could not take, refused
//	                                              with a negative PUBACK or a disconnect
//	hearth_broker_messages_dropped_total           messages dropped on their way to a subscriber
//	                                              whose in-flight store or queue was full
//
// Reasons are the broker's own (broker.Refused*, Stats); no label holds a
// client ID, a username or an address, so the series stay few.
type brokerMetrics struct {
	connects  *prometheus.CounterVec
	publishes prometheus.Counter
}

func newBrokerMetrics(reg prometheus.Registerer) *brokerMetrics {
	m := &brokerMetrics{
		connects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hearth_broker_refused_connects_total",
			Help: "CONNECTs the embedded broker refused, by reason.",
		}, []string{"reason"}),
		publishes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hearth_broker_refused_publishes_total",
			Help: "PUBLISHes and wills the embedded broker's topic ACL refused.",
		}),
	}
	// Every reason from the start, at 0: a rate() over a series that
	// appears only at the first refusal misses that one.
	for _, r := range []string{broker.RefusedRate, broker.RefusedMaxConnections, broker.RefusedCredentials,
		broker.RefusedNotAuthorized, broker.RefusedLoginFailures, broker.RefusedOther} {
		m.connects.WithLabelValues(r)
	}
	reg.MustRegister(m.connects, m.publishes)
	return m
}

// connect counts a refused CONNECT (broker.Options.OnConnect).
func (m *brokerMetrics) connect(e broker.ConnectEvent) {
	if !e.Accepted {
		m.connects.WithLabelValues(e.Refusal).Inc()
	}
}

// watchLimits exports the broker's counts of its limits (broker.Stats).
func (m *brokerMetrics) watchLimits(reg prometheus.Registerer, b *broker.Broker) {
	closes := []struct {
		reason string
		count  func(broker.Stats) uint64
	}{
		{"connect_timeout", func(s broker.Stats) uint64 { return s.ConnectTimeouts }},
		{"bad_first_packet", func(s broker.Stats) uint64 { return s.BadFirstPackets }},
		{"max_unauthenticated", func(s broker.Stats) uint64 { return s.UnauthenticatedFull }},
		{"keepalive", func(s broker.Stats) uint64 { return s.KeepAliveTimeouts }},
	}
	for _, c := range closes {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "hearth_broker_limit_closes_total",
			Help:        "Connections the embedded broker closed at its limits before authentication, or for silence, by reason.",
			ConstLabels: prometheus.Labels{"reason": c.reason},
		}, func() float64 { return float64(c.count(b.Stats())) }))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hearth_broker_unauthenticated_connections",
		Help: "Connections open at the embedded broker and not yet admitted.",
	}, func() float64 { return float64(b.Stats().Unauthenticated) }))
	for _, c := range []struct {
		name, help string
		count      func(broker.Stats) uint64
	}{
		{"hearth_broker_publishers_slowed_total", "Episodes in which the embedded broker paused reading a publisher whose commands came faster than Hearth stored them.",
			func(s broker.Stats) uint64 { return s.PublishersSlowed }},
		{"hearth_broker_commands_nacked_total", "Commands the store could not take, refused to their publisher with a negative PUBACK (MQTT 5) or a disconnect (3.1.1).",
			func(s broker.Stats) uint64 { return s.CommandsNacked }},
		{"hearth_broker_messages_dropped_total", "Messages the embedded broker dropped on their way to a subscriber whose in-flight store or outbound queue was full.",
			func(s broker.Stats) uint64 { return s.MessagesDropped }},
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
			func() float64 { return float64(c.count(b.Stats())) }))
	}
}
