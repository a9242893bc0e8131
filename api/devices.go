package api

import (
	"net/http"
	"strconv"

	"github.com/hearthd/hearth/dispatcher"
)

// Devices is what the API reads the devices from; *dispatcher.Dispatcher
// is one.
type Devices interface {
	// Devices returns every device's status, in config order.
	Devices() []dispatcher.DeviceStatus
	// Device returns one device's status, and false for an unknown one.
	Device(id string) (dispatcher.DeviceStatus, bool)
}

// DeviceList is the body of GET /api/v1/devices.
type DeviceList struct {
	// Devices are in config order; [] (never null) when none is
	// configured.
	Devices []dispatcher.DeviceStatus `json:"devices"`
}

// RegisterDevices adds the device endpoints to mux:
//
//   - GET /api/v1/devices answers 200 with a DeviceList,
//     {"devices":[…]}, one dispatcher.DeviceStatus per device;
//   - GET /api/v1/devices/{device} answers 200 with that device's
//     dispatcher.DeviceStatus, or 404 {"error":"unknown_device"}.
func RegisterDevices(mux *http.ServeMux, d Devices) {
	mux.HandleFunc("GET /api/v1/devices", func(w http.ResponseWriter, _ *http.Request) {
		list := d.Devices()
		if list == nil {
			list = []dispatcher.DeviceStatus{}
		}
		writeJSON(w, http.StatusOK, DeviceList{Devices: list})
	})
	mux.HandleFunc("GET /api/v1/devices/{device}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("device")
		s, ok := d.Device(id)
		if !ok {
			writeError(w, http.StatusNotFound, "unknown_device", "no device "+strconv.Quote(id)+" is configured")
			return
		}
		writeJSON(w, http.StatusOK, s)
	})
}
