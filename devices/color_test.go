package devices

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// Every color form Zigbee2MQTT takes is accepted in its canonical form,
// and mixed or out-of-range forms are refused.
func TestValidateLightColorForms(t *testing.T) {
	ok := []struct {
		name string
		raw  string
		want map[string]any
	}{
		{"xy", `{"x":0.3,"y":0.6}`, map[string]any{"x": 0.3, "y": 0.6}},
		{"hue/saturation", `{"hue":120,"saturation":100}`, map[string]any{"hue": 120.0, "saturation": 100.0}},
		{"h/s as Home Assistant sends it", `{"h":30.5,"s":80}`, map[string]any{"h": 30.5, "s": 80.0}},
		{"rgb", `{"r":255,"g":0,"b":0}`, map[string]any{"r": 255.0, "g": 0.0, "b": 0.0}},
		{"hex, lower-cased", `{"hex":"#FF8800"}`, map[string]any{"hex": "#ff8800"}},
	}
	for _, tc := range ok {
		cmd, err := ParseCommand(Light, []byte(`{"color":`+tc.raw+`}`))
		if err != nil {
			t.Errorf("%s: ParseCommand error %v", tc.name, err)
			continue
		}
		if got := cmd.Target["color"]; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: color = %#v, want %#v", tc.name, got, tc.want)
		}
		// Stored as JSON and read back, the target is the same.
		b, _ := json.Marshal(cmd.Target)
		var back Target
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, cmd.Target) {
			t.Errorf("%s: target %v round-trips through JSON as %v (%v)", tc.name, cmd.Target, back, err)
		}
	}
	bad := []struct {
		name string
		raw  string
		want Reason
	}{
		{"a string", `"red"`, ReasonInvalidValue},
		{"mixed forms", `{"x":0.3,"y":0.3,"hue":10}`, ReasonInvalidValue},
		{"half a form", `{"x":0.3}`, ReasonInvalidValue},
		{"x above 1", `{"x":1.2,"y":0.3}`, ReasonOutOfRange},
		{"hue above 360", `{"hue":361,"saturation":1}`, ReasonOutOfRange},
		{"fractional red", `{"r":1.5,"g":0,"b":0}`, ReasonInvalidValue},
		{"short hex", `{"hex":"#fff"}`, ReasonInvalidValue},
		{"hex without #", `{"hex":"ff8800"}`, ReasonInvalidValue},
		{"a string number", `{"x":"0.3","y":0.3}`, ReasonInvalidValue},
	}
	for _, tc := range bad {
		_, err := ParseCommand(Light, []byte(`{"color":`+tc.raw+`}`))
		if got := ReasonOf(err); err == nil || got != tc.want {
			t.Errorf("%s: ParseCommand(color %s) = %v, want %s", tc.name, tc.raw, err, tc.want)
		}
	}
}

// The conversion to xy is Zigbee2MQTT's: sRGB red through the gamma curve
// and the Wide RGB D65 matrix lands where Zigbee2MQTT's own "red fix"
// names it (toZigbee.ts light_color: x 0.701, y 0.299).
func TestColorXYUsesZigbee2MQTTsConversion(t *testing.T) {
	tests := []struct {
		name   string
		color  map[string]any
		wx, wy float64
	}{
		{"rgb red", map[string]any{"r": 255.0, "g": 0.0, "b": 0.0}, 0.7006, 0.2993},
		{"hex red", map[string]any{"hex": "#ff0000"}, 0.7006, 0.2993},
		{"hue 0 saturation 100", map[string]any{"hue": 0.0, "saturation": 100.0}, 0.7006, 0.2993},
		{"h/s white", map[string]any{"h": 0.0, "s": 0.0}, 0.3227, 0.3290},
		{"xy as given", map[string]any{"x": 0.5, "y": 0.4}, 0.5, 0.4},
	}
	for _, tc := range tests {
		x, y, ok := ColorXY(tc.color)
		if !ok || math.Abs(x-tc.wx) > 0.0005 || math.Abs(y-tc.wy) > 0.0005 {
			t.Errorf("%s: ColorXY(%v) = %.4f, %.4f, %v; want %.4f, %.4f", tc.name, tc.color, x, y, ok, tc.wx, tc.wy)
		}
	}
}

// A color is confirmed by the bulb's report of it in xy, within
// ColorTolerance, whatever form the target took; a report of another
// color is not.
func TestSatisfiedLightColor(t *testing.T) {
	red := Target{"color": map[string]any{"r": 255.0, "g": 0.0, "b": 0.0}}
	tests := []struct {
		name   string
		target Target
		state  string
		want   bool
	}{
		{"rgb red, reported in the Hue bulb's gamut C", red, `{"color":{"x":0.6915,"y":0.3083},"color_mode":"xy"}`, true},
		{"rgb red, reported green", red, `{"color":{"x":0.17,"y":0.7}}`, false},
		{"rgb red, no color reported", red, `{"state":"ON"}`, false},
		{"rgb red, color reported as a string", red, `{"color":"red"}`, false},
		{"xy, reported with its hs", Target{"color": map[string]any{"x": 0.3, "y": 0.3}}, `{"color":{"x":0.3011,"y":0.2994,"hue":250,"saturation":20}}`, true},
		{"xy, just past the tolerance", Target{"color": map[string]any{"x": 0.3, "y": 0.3}}, `{"color":{"x":0.321,"y":0.3}}`, false},
		{"hs, reported as hs only", Target{"color": map[string]any{"h": 120.0, "s": 100.0}}, `{"color":{"hue":121,"saturation":99}}`, true},
		{"hex, reported in xy", Target{"color": map[string]any{"hex": "#0000ff"}}, `{"color":{"x":0.1355,"y":0.0399}}`, true},
	}
	for _, tc := range tests {
		var state map[string]any
		if err := json.Unmarshal([]byte(tc.state), &state); err != nil {
			t.Fatal(err)
		}
		if got := Satisfied(Light, tc.target, state); got != tc.want {
			t.Errorf("%s: Satisfied(%v, %s) = %v, want %v", tc.name, tc.target, tc.state, got, tc.want)
		}
	}
}
