package devices

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// ColorTolerance is how far apart, in CIE 1931 xy, a reported color may be
// from a target color and still confirm it: 0.02. Colors that close look
// alike to most people (a few MacAdam steps); the margin absorbs the
// bulb's 16-bit xy quantisation, the 8-bit hue and saturation of a bulb in
// hs mode, and a Hue bulb pulling a pure sRGB primary into its gamut C
// (0.013 for red). A target well outside a bulb's gamut is reported at the
// gamut's edge and is not confirmed.
const ColorTolerance = 0.02

// The forms of a light's color that Zigbee2MQTT takes in a set
// (zigbee-herdsman-converters lib/color.ts, Color.fromConverterArg, and
// Zigbee2MQTT's light docs, "color"): xy {"x","y"} in 0–1, hue and
// saturation {"hue","saturation"} or {"h","s"} (hue in degrees 0–360,
// saturation in percent 0–100), rgb {"r","g","b"} (0–255 each) and
// {"hex":"#rrggbb"}. One form per command; the canonical target keeps the
// caller's form, numbers as float64 and hex in lower case.
var colorForms = []struct {
	keys []string // sorted
	max  []float64
}{
	{[]string{"x", "y"}, []float64{1, 1}},
	{[]string{"hue", "saturation"}, []float64{360, 100}},
	{[]string{"h", "s"}, []float64{360, 100}},
	{[]string{"b", "g", "r"}, []float64{255, 255, 255}},
}

// canonicalColor validates a color target and returns it canonical.
func canonicalColor(v any) (map[string]any, *Error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, reject(ReasonInvalidValue, "color must be an object: {\"x\",\"y\"}, {\"hue\",\"saturation\"}, {\"h\",\"s\"}, {\"r\",\"g\",\"b\"} or {\"hex\":\"#rrggbb\"}, got %s", show(v))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 1 && keys[0] == "hex" {
		s, ok := m["hex"].(string)
		if !ok || !validHex(s) {
			return nil, reject(ReasonInvalidValue, "color hex must be a string \"#rrggbb\", got %s", show(m["hex"]))
		}
		return map[string]any{"hex": strings.ToLower(s)}, nil
	}
	for _, f := range colorForms {
		if !equalStrings(keys, f.keys) {
			continue
		}
		out := make(map[string]any, len(keys))
		for i, k := range f.keys {
			n, ok := number(m[k])
			if !ok {
				return nil, reject(ReasonInvalidValue, "color %s must be a number, got %s", k, show(m[k]))
			}
			if n < 0 || n > f.max[i] {
				return nil, reject(ReasonOutOfRange, "color %s must be within 0–%g, got %s", k, f.max[i], show(m[k]))
			}
			if f.max[i] == 255 && n != math.Trunc(n) {
				return nil, reject(ReasonInvalidValue, "color %s must be a whole number, got %s", k, show(m[k]))
			}
			if n == 0 {
				n = 0 // -0 is sent as 0
			}
			out[k] = n
		}
		return out, nil
	}
	return nil, reject(ReasonInvalidValue, "color %s is not one form: send {\"x\",\"y\"}, {\"hue\",\"saturation\"}, {\"h\",\"s\"}, {\"r\",\"g\",\"b\"} or {\"hex\":\"#rrggbb\"}", show(v))
}

func validHex(s string) bool {
	if len(s) != 7 || s[0] != '#' {
		return false
	}
	_, err := strconv.ParseUint(s[1:], 16, 32)
	return err == nil
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ColorXY returns a color (a target's canonical form, or a reported
// color object) as CIE 1931 xy, and false when it holds no color it can
// convert. A reported color may carry several forms; x and y win.
//
// rgb and hex are converted as Zigbee2MQTT converts them before sending
// (zigbee-herdsman-converters lib/color.ts: ColorRGB.gammaCorrected, the
// sRGB transfer function of IEC 61966-2-1, then ColorRGB.toXY, the "Wide
// RGB D65" matrix of Philips Hue's "RGB to xy" developer note, by way of
// usolved/cie-rgb-converter); hue and saturation as a full-value HSV color
// (ColorHSV.toRGB) converted the same way, as lib/philips.ts does.
func ColorXY(v any) (x, y float64, ok bool) {
	m, isMap := v.(map[string]any)
	if !isMap {
		return 0, 0, false
	}
	if x, ok1 := number(m["x"]); ok1 {
		if y, ok2 := number(m["y"]); ok2 {
			return x, y, true
		}
	}
	if s, ok := m["hex"].(string); ok && validHex(s) {
		n, _ := strconv.ParseUint(s[1:], 16, 32)
		x, y := rgbToXY(float64(n>>16&255)/255, float64(n>>8&255)/255, float64(n&255)/255)
		return x, y, true
	}
	r, ok1 := number(m["r"])
	g, ok2 := number(m["g"])
	b, ok3 := number(m["b"])
	if ok1 && ok2 && ok3 {
		x, y := rgbToXY(r/255, g/255, b/255)
		return x, y, true
	}
	h, okh := number(m["hue"])
	s, oks := number(m["saturation"])
	if !okh || !oks {
		h, okh = number(m["h"])
		s, oks = number(m["s"])
	}
	if okh && oks {
		r, g, b := hsvToRGB(h, s/100, 1)
		x, y := rgbToXY(r, g, b)
		return x, y, true
	}
	return 0, 0, false
}

// rgbToXY converts sRGB components in 0–1 to CIE 1931 xy (see ColorXY).
func rgbToXY(r, g, b float64) (x, y float64) {
	lin := func(v float64) float64 {
		if v > 0.04045 {
			return math.Pow((v+0.055)/1.055, 2.4)
		}
		return v / 12.92
	}
	r, g, b = lin(r), lin(g), lin(b)
	X := r*0.664511 + g*0.154324 + b*0.162028
	Y := r*0.283881 + g*0.668433 + b*0.047685
	Z := r*0.000088 + g*0.07231 + b*0.986039
	sum := X + Y + Z
	if sum == 0 {
		return 0, 0
	}
	return X / sum, Y / sum
}

// hsvToRGB converts hue in degrees, saturation and value in 0–1 to RGB in
// 0–1 (the standard hexcone model, as ColorHSV.toRGB).
func hsvToRGB(h, s, v float64) (r, g, b float64) {
	h = math.Mod(h, 360)
	if h < 0 {
		h += 360
	}
	c := v * s
	hp := h / 60
	x := c * (1 - math.Abs(math.Mod(hp, 2)-1))
	switch {
	case hp < 1:
		r, g, b = c, x, 0
	case hp < 2:
		r, g, b = x, c, 0
	case hp < 3:
		r, g, b = 0, c, x
	case hp < 4:
		r, g, b = 0, x, c
	case hp < 5:
		r, g, b = x, 0, c
	default:
		r, g, b = c, 0, x
	}
	m := v - c
	return r + m, g + m, b + m
}

// colorSatisfied reports whether a reported color is within
// ColorTolerance of the target color, in xy.
func colorSatisfied(want, got any) bool {
	wx, wy, ok1 := ColorXY(want)
	gx, gy, ok2 := ColorXY(got)
	return ok1 && ok2 && math.Hypot(wx-gx, wy-gy) <= ColorTolerance
}
