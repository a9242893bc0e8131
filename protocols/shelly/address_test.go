package shelly

import (
	"errors"
	"testing"

	"github.com/hearthd/hearth/devices"
)

func TestParseAddress(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		class devices.Class
		want  Address
	}{
		{"shellyplus1pm-a8032ab12345", devices.Switch, Address{"shellyplus1pm-a8032ab12345", KindSwitch, 0, -1}},
		{"shellyplus1pm-a8032ab12345/switch:0", devices.Switch, Address{"shellyplus1pm-a8032ab12345", KindSwitch, 0, -1}},
		{"shellypro4pm-f008d1d8b8b8/switch:3", devices.Switch, Address{"shellypro4pm-f008d1d8b8b8", KindSwitch, 3, -1}},
		{"dimmer", devices.Light, Address{"dimmer", KindLight, 0, -1}},
		{"relay/switch:1", devices.Light, Address{"relay", KindSwitch, 1, -1}},
		{"pro2pm/cover:0", devices.Cover, Address{"pro2pm", KindCover, 0, -1}},
		{"plus1/switch:0", devices.Cover, Address{"plus1", KindSwitch, 0, 0}},
		{"plus1/switch:0/input:100", devices.Cover, Address{"plus1", KindSwitch, 0, 100}},
	} {
		got, err := ParseAddress(tc.addr, tc.class)
		if err != nil || got != tc.want {
			t.Errorf("ParseAddress(%q, %s) = %+v, %v; want %+v", tc.addr, tc.class, got, err, tc.want)
		}
		if back, err := ParseAddress(got.String(), tc.class); err != nil || back != got {
			t.Errorf("ParseAddress(%q.String() = %q) = %+v, %v", tc.addr, got.String(), back, err)
		}
	}
	for _, tc := range []struct {
		addr  string
		class devices.Class
	}{
		{"", devices.Switch}, {"hearth", devices.Switch}, {"a+b", devices.Switch}, {"x/#", devices.Switch},
		{"x/switch", devices.Switch}, {"x/switch:", devices.Switch}, {"x/switch:-1", devices.Switch}, {"x/switch:1000", devices.Switch},
		{"x/relay:0", devices.Switch}, {"x/light:0", devices.Switch}, {"x/cover:0", devices.Light}, {"x/input:0", devices.Cover},
		{"x/switch:0/input:1", devices.Switch}, {"x/cover:0/input:1", devices.Cover}, {"x/switch:0/switch:1", devices.Cover},
		{"x/a/b/c", devices.Switch}, {"x", devices.Lock}, {"x/switch:0", devices.Lock},
	} {
		if got, err := ParseAddress(tc.addr, tc.class); !errors.Is(err, ErrBadAddress) {
			t.Errorf("ParseAddress(%q, %s) = %+v, %v; want ErrBadAddress", tc.addr, tc.class, got, err)
		}
	}
}
