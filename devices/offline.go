package devices

import "fmt"

// Offline is what becomes of a command for a device its bridge reports
// offline (Zigbee2MQTT's availability, a Z-Wave node the driver says is
// dead). A sleeping device is not offline: asleep is a Z-Wave node status
// of its own, and a Zigbee sleepy end device keeps its availability while
// it sleeps.
type Offline string

const (
	// OfflineDefault is no choice of the device's own: see
	// Device.OnOffline for what its class and sleep make of it.
	OfflineDefault Offline = ""
	// OfflineFail ends the command at once, failed with reason
	// device_offline, with no attempt sent: the sender learns now that
	// the light will not turn on, or that the door is not locked.
	OfflineFail Offline = "fail"
	// OfflineQueue holds the command, reported queued with reason
	// device_offline, until the bridge says the device is back within
	// the command's TTL (then it runs), else it ends expired.
	OfflineQueue Offline = "queue"
)

// ParseOffline returns the Offline named s ("fail" or "queue").
func ParseOffline(s string) (Offline, error) {
	switch o := Offline(s); o {
	case OfflineFail, OfflineQueue:
		return o, nil
	}
	return "", fmt.Errorf("unknown value %q (known: fail, queue)", s)
}

// OnOffline returns what becomes of d's commands while its bridge reports
// it offline: d.Offline when set; else queue for a sleepy device, whose
// commands wait for its next wake anyway (a battery device's availability
// often times out over a long sleep, and its next message brings it
// back); else fail, for every class: a light that does not come on, or a
// lock that cannot lock, should say so now rather than minutes later.
func (d Device) OnOffline() Offline {
	switch {
	case d.Offline != OfflineDefault:
		return d.Offline
	case d.Sleep.Sleepy:
		return OfflineQueue
	}
	return OfflineFail
}
