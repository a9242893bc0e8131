package devices

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// parseCase is one ParseCommand input and either the command it must yield
// or the reason it must be rejected with.
type parseCase struct {
	name    string
	class   Class
	payload string
	want    Command // compared when reason is ""
	reason  Reason
}

func runParseCases(t *testing.T, cases []parseCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			class := tc.class
			if class == "" {
				class = Light
			}
			got, err := ParseCommand(class, []byte(tc.payload))
			if tc.reason != "" {
				if err == nil {
					t.Fatalf("ParseCommand(%s, %q) = %+v, nil; want reason %s", class, tc.payload, got, tc.reason)
				}
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("ParseCommand(%s, %q) error %v (%T) is not an *Error", class, tc.payload, err, err)
				}
				if e.Reason != tc.reason {
					t.Errorf("ParseCommand(%s, %q) reason = %s (%s), want %s", class, tc.payload, e.Reason, e.Detail, tc.reason)
				}
				if e.Detail == "" {
					t.Errorf("ParseCommand(%s, %q): rejection %s carries no detail", class, tc.payload, e.Reason)
				}
				if !reflect.DeepEqual(got, Command{}) {
					t.Errorf("ParseCommand(%s, %q) returned a partial command %+v with its error", class, tc.payload, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseCommand(%s, %q) error %v, want %+v", class, tc.payload, err, tc.want)
			}
			if !got.IssuedAt.Equal(tc.want.IssuedAt) {
				t.Errorf("ParseCommand(%s, %q) IssuedAt = %v, want %v", class, tc.payload, got.IssuedAt, tc.want.IssuedAt)
			}
			got.IssuedAt, tc.want.IssuedAt = time.Time{}, time.Time{}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseCommand(%s, %q) = %#v, want %#v", class, tc.payload, got, tc.want)
			}
		})
	}
}

func TestParseCommandPayloadForms(t *testing.T) {
	on := Command{Target: Target{"state": "ON"}}
	runParseCases(t, []parseCase{
		{name: "plain string lower case is canonical state", payload: "on", want: on},
		{name: "plain string upper case", payload: "ON", want: on},
		{name: "plain string with surrounding whitespace", payload: " \toff\r\n", want: Command{Target: Target{"state": "OFF"}}},
		{name: "plain string lock", class: Lock, payload: "LOCK", want: Command{Target: Target{"state": "LOCK"}}},
		{name: "plain string unlock mixed case", class: Lock, payload: "Unlock", want: Command{Target: Target{"state": "UNLOCK"}}},
		{name: "JSON string", payload: `"on"`, want: on},
		{name: "JSON string with escape", payload: `"\u004fN"`, want: on},
		{name: "JSON object", payload: `{"state":"ON","brightness":128}`, want: Command{Target: Target{"state": "ON", "brightness": 128.0}}},
		{name: "JSON object with whitespace around", payload: "\n {\"state\":\"on\"} \n", want: on},
		{name: "JSON array", payload: `[{"state":"ON"}]`, reason: ReasonInvalidPayload},
		{name: "empty", payload: "", reason: ReasonInvalidPayload},
		{name: "only whitespace", payload: " \n\t ", reason: ReasonInvalidPayload},
		{name: "empty object", payload: `{}`, reason: ReasonInvalidPayload},
		{name: "malformed object", payload: `{"state":"ON"`, reason: ReasonInvalidPayload},
		{name: "object followed by another object", payload: `{"state":"ON"}{"state":"OFF"}`, reason: ReasonInvalidPayload},
		{name: "object followed by garbage", payload: `{"state":"ON"} x`, reason: ReasonInvalidPayload},
		{name: "malformed JSON string", payload: `"ON`, reason: ReasonInvalidPayload},
		{name: "JSON string then data", payload: `"ON" "OFF"`, reason: ReasonInvalidPayload},
		{name: "invalid UTF-8", payload: "O\xffN", reason: ReasonInvalidPayload},
		{name: "plain string with control character", payload: "O\x01N", reason: ReasonInvalidPayload},
		{name: "plain string with tab inside", payload: "O\tN", reason: ReasonInvalidPayload},
		{name: "plain string with DEL", payload: "ON\x7f", reason: ReasonInvalidPayload},
		{name: "plain string not a state", payload: "bright", reason: ReasonInvalidValue},
		{name: "a JSON number is not a command", payload: "42", reason: ReasonInvalidPayload},
		{name: "JSON null is not a command", payload: "null", reason: ReasonInvalidPayload},
		{name: "JSON true is not a command", payload: "true", reason: ReasonInvalidPayload},
		{name: "a second object after the first", payload: `{"state":"ON"}{"state":"OFF"}`, reason: ReasonInvalidPayload},
		{name: "a stray brace after the object", payload: `{"state":"ON"}}`, reason: ReasonInvalidPayload},
		{name: "a stray bracket after the object", payload: `{"state":"ON"}]`, reason: ReasonInvalidPayload},
		{name: "issued_at of a clock never set", payload: `{"state":"ON","issued_at":"0001-01-01T00:00:00Z","ttl":"1s"}`, reason: ReasonInvalidIssuedAt},
		{name: "negative zero is sent as zero", payload: `{"brightness":-0}`, want: Command{Target: Target{"brightness": 0.0}}},
		{name: "only reserved keys", payload: `{"op_id":"a","ttl":"5s"}`, reason: ReasonInvalidPayload},
		{name: "only a parameter", payload: `{"transition":2}`, reason: ReasonInvalidPayload},
		{name: "parameter with a state", payload: `{"state":"ON","transition":0.5}`, want: Command{Target: Target{"state": "ON", "transition": 0.5}}},
	})
}

// A JSON object followed by a stray '}' or ']' is rejected:
// json.Decoder.More alone reports false before a closing bracket.
func TestParseCommandRejectsTrailingCloser(t *testing.T) {
	runParseCases(t, []parseCase{
		{name: "stray closing brace", payload: `{"state":"ON"}}`, reason: ReasonInvalidPayload},
		{name: "stray closing bracket", payload: `{"state":"ON"}]`, reason: ReasonInvalidPayload},
	})
}

func TestParseCommandPayloadSizeLimit(t *testing.T) {
	// Pad a valid object with whitespace inside it so only the size varies.
	object := func(size int) string {
		const head, tail = `{"state":"ON"`, `}`
		return head + strings.Repeat(" ", size-len(head)-len(tail)) + tail
	}
	plain := func(size int) string { return "ON" + strings.Repeat(" ", size-2) }
	runParseCases(t, []parseCase{
		{name: "object of exactly 64 KiB", payload: object(MaxPayloadBytes), want: Command{Target: Target{"state": "ON"}}},
		{name: "object one byte over 64 KiB", payload: object(MaxPayloadBytes + 1), reason: ReasonPayloadTooLarge},
		{name: "plain string of exactly 64 KiB", payload: plain(MaxPayloadBytes), want: Command{Target: Target{"state": "ON"}}},
		{name: "whitespace one byte over 64 KiB", payload: plain(MaxPayloadBytes + 1), reason: ReasonPayloadTooLarge},
		{name: "garbage over 64 KiB is too large before it is malformed", payload: strings.Repeat("\xff", MaxPayloadBytes+1), reason: ReasonPayloadTooLarge},
	})
}

func TestParseCommandOpID(t *testing.T) {
	id64 := strings.Repeat("a", MaxOpIDBytes)
	// 21 three-byte runes plus one byte: 64 bytes but only 22 runes.
	multi64 := strings.Repeat("€", 21) + "x"
	runParseCases(t, []parseCase{
		{name: "given", payload: `{"state":"ON","op_id":"op-1"}`, want: Command{OpID: "op-1", Target: Target{"state": "ON"}}},
		{name: "exactly 64 bytes", payload: `{"state":"ON","op_id":"` + id64 + `"}`, want: Command{OpID: id64, Target: Target{"state": "ON"}}},
		{name: "64 bytes of multi-byte runes", payload: `{"state":"ON","op_id":"` + multi64 + `"}`, want: Command{OpID: multi64, Target: Target{"state": "ON"}}},
		{name: "65 bytes", payload: `{"state":"ON","op_id":"` + id64 + `b"}`, reason: ReasonInvalidOpID},
		{name: "65 bytes of multi-byte runes", payload: `{"state":"ON","op_id":"` + multi64 + `y"}`, reason: ReasonInvalidOpID},
		{name: "empty", payload: `{"state":"ON","op_id":""}`, reason: ReasonInvalidOpID},
		{name: "number", payload: `{"state":"ON","op_id":12}`, reason: ReasonInvalidOpID},
		{name: "null", payload: `{"state":"ON","op_id":null}`, reason: ReasonInvalidOpID},
		{name: "contains a space", payload: `{"state":"ON","op_id":"a b"}`, reason: ReasonInvalidOpID},
		{name: "contains a newline", payload: `{"state":"ON","op_id":"a\nb"}`, reason: ReasonInvalidOpID},
		{name: "contains DEL", payload: `{"state":"ON","op_id":"a\u007fb"}`, reason: ReasonInvalidOpID},
		{name: "contains the replacement character", payload: `{"state":"ON","op_id":"a\ufffdb"}`, reason: ReasonInvalidOpID},
	})
}

func TestValidOpID(t *testing.T) {
	tests := []struct {
		id     string
		wantOK bool
	}{
		{"01JD4Z3Q9Y6W8G2K7M5N1P0R3S", true},
		{"a", true},
		{strings.Repeat("x", 64), true},
		{strings.Repeat("x", 65), false},
		{"", false},
		{"a b", false},
		{"a\tb", false},
		{"\x00", false},
	}
	for _, tc := range tests {
		err := ValidOpID(tc.id)
		if got := err == nil; got != tc.wantOK {
			t.Errorf("ValidOpID(%q) = %v, want ok=%v", tc.id, err, tc.wantOK)
		}
		if err != nil && ReasonOf(err) != ReasonInvalidOpID {
			t.Errorf("ValidOpID(%q) reason = %s, want %s", tc.id, ReasonOf(err), ReasonInvalidOpID)
		}
	}
}

// ValidOpID promises "printable UTF-8 without spaces"; a no-break space or
// a C1 control character is neither.
func TestValidOpIDRejectsUnicodeSpacesAndControls(t *testing.T) {
	for _, id := range []string{"a\u00a0b", "a\u0085b", "a\u2028b", "\u200b"} {
		if err := ValidOpID(id); err == nil {
			t.Errorf("ValidOpID(%q) = nil, want an error", id)
		}
	}
}

func TestParseCommandTTL(t *testing.T) {
	on := Target{"state": "ON"}
	runParseCases(t, []parseCase{
		{name: "duration string", payload: `{"state":"ON","ttl":"30s"}`, want: Command{TTL: 30 * time.Second, Target: on}},
		{name: "compound duration string", payload: `{"state":"ON","ttl":"1h30m"}`, want: Command{TTL: 90 * time.Minute, Target: on}},
		{name: "integer seconds", payload: `{"state":"ON","ttl":30}`, want: Command{TTL: 30 * time.Second, Target: on}},
		{name: "fractional seconds", payload: `{"state":"ON","ttl":0.5}`, want: Command{TTL: 500 * time.Millisecond, Target: on}},
		{name: "exponent seconds", payload: `{"state":"ON","ttl":1e2}`, want: Command{TTL: 100 * time.Second, Target: on}},
		{name: "exactly MaxTTL as a string", payload: `{"state":"ON","ttl":"720h"}`, want: Command{TTL: MaxTTL, Target: on}},
		{name: "exactly MaxTTL in seconds", payload: `{"state":"ON","ttl":2592000}`, want: Command{TTL: MaxTTL, Target: on}},
		{name: "not a duration", payload: `{"state":"ON","ttl":"soon"}`, reason: ReasonInvalidTTL},
		{name: "bare number string without unit", payload: `{"state":"ON","ttl":"30"}`, reason: ReasonInvalidTTL},
		{name: "negative seconds", payload: `{"state":"ON","ttl":-1}`, reason: ReasonInvalidTTL},
		{name: "negative duration string", payload: `{"state":"ON","ttl":"-5s"}`, reason: ReasonInvalidTTL},
		{name: "zero seconds", payload: `{"state":"ON","ttl":0}`, reason: ReasonInvalidTTL},
		{name: "zero duration string", payload: `{"state":"ON","ttl":"0s"}`, reason: ReasonInvalidTTL},
		{name: "below one nanosecond", payload: `{"state":"ON","ttl":1e-10}`, reason: ReasonInvalidTTL},
		{name: "over MaxTTL as a string", payload: `{"state":"ON","ttl":"721h"}`, reason: ReasonInvalidTTL},
		{name: "over MaxTTL in seconds", payload: `{"state":"ON","ttl":2592001}`, reason: ReasonInvalidTTL},
		{name: "seconds beyond float64", payload: `{"state":"ON","ttl":1e400}`, reason: ReasonInvalidTTL},
		{name: "hugely negative seconds", payload: `{"state":"ON","ttl":-1e300}`, reason: ReasonInvalidTTL},
		{name: "duration string overflowing int64", payload: `{"state":"ON","ttl":"9999999999h"}`, reason: ReasonInvalidTTL},
		{name: "boolean", payload: `{"state":"ON","ttl":true}`, reason: ReasonInvalidTTL},
		{name: "null", payload: `{"state":"ON","ttl":null}`, reason: ReasonInvalidTTL},
	})
}

func TestParseCommandIssuedAt(t *testing.T) {
	on := Target{"state": "ON"}
	runParseCases(t, []parseCase{
		{name: "UTC", payload: `{"state":"ON","issued_at":"2026-11-29T19:00:00Z"}`,
			want: Command{IssuedAt: time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC), Target: on}},
		{name: "with offset", payload: `{"state":"ON","issued_at":"2026-11-29T20:00:00+01:00"}`,
			want: Command{IssuedAt: time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC), Target: on}},
		{name: "with negative offset and fraction", payload: `{"state":"ON","issued_at":"2026-11-29T14:00:00.25-05:00"}`,
			want: Command{IssuedAt: time.Date(2026, 11, 29, 19, 0, 0, 250e6, time.UTC), Target: on}},
		{name: "all reserved keys", payload: `{"state":"ON","op_id":"x","ttl":"1m","issued_at":"2026-11-29T19:00:00Z"}`,
			want: Command{OpID: "x", TTL: time.Minute, IssuedAt: time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC), Target: on}},
		{name: "date only", payload: `{"state":"ON","issued_at":"2026-11-29"}`, reason: ReasonInvalidIssuedAt},
		{name: "no zone", payload: `{"state":"ON","issued_at":"2026-11-29T19:00:00"}`, reason: ReasonInvalidIssuedAt},
		{name: "unix seconds", payload: `{"state":"ON","issued_at":1764442800}`, reason: ReasonInvalidIssuedAt},
		{name: "null", payload: `{"state":"ON","issued_at":null}`, reason: ReasonInvalidIssuedAt},
		{name: "empty string", payload: `{"state":"ON","issued_at":""}`, reason: ReasonInvalidIssuedAt},
		{name: "exactly 2000-01-01 is plausible", payload: `{"state":"ON","issued_at":"2000-01-01T00:00:00Z"}`,
			want: Command{IssuedAt: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), Target: on}},
		{name: "just before 2000: clock not set", payload: `{"state":"ON","issued_at":"1999-12-31T23:59:59.999Z"}`, reason: ReasonInvalidIssuedAt},
		{name: "2000-01-01 east of UTC is still 1999", payload: `{"state":"ON","issued_at":"2000-01-01T00:30:00+01:00"}`, reason: ReasonInvalidIssuedAt},
		{name: "unix epoch", payload: `{"state":"ON","issued_at":"1970-01-01T00:00:00Z"}`, reason: ReasonInvalidIssuedAt},
	})
}

func TestParseCommandRelativeCommands(t *testing.T) {
	runParseCases(t, []parseCase{
		{name: "plain TOGGLE", payload: "TOGGLE", reason: ReasonRelativeCommand},
		{name: "plain toggle lower case", payload: "toggle", reason: ReasonRelativeCommand},
		{name: "plain Toggle with spaces", payload: "  Toggle ", reason: ReasonRelativeCommand},
		{name: "JSON string toggle", payload: `"toggle"`, reason: ReasonRelativeCommand},
		{name: "JSON state toggle", payload: `{"state":"tOgGlE"}`, reason: ReasonRelativeCommand},
		{name: "switch TOGGLE", class: Switch, payload: "TOGGLE", reason: ReasonRelativeCommand},
		{name: "brightness_step", payload: `{"brightness_step":10}`, reason: ReasonRelativeCommand},
		{name: "brightness_move", payload: `{"brightness_move":-20}`, reason: ReasonRelativeCommand},
		{name: "brightness_step_onoff", payload: `{"brightness_step_onoff":10}`, reason: ReasonRelativeCommand},
		{name: "brightness_move_onoff", payload: `{"brightness_move_onoff":10}`, reason: ReasonRelativeCommand},
		{name: "color_temp_step", payload: `{"color_temp_step":5}`, reason: ReasonRelativeCommand},
		{name: "relative next to an absolute state", payload: `{"state":"ON","brightness_step":10}`, reason: ReasonRelativeCommand},
		{name: "relative beats an unknown attribute", payload: `{"aaa":1,"brightness_step":10}`, reason: ReasonRelativeCommand},
		{name: "relative beats an out of range value", payload: `{"brightness":999,"brightness_step":10}`, reason: ReasonRelativeCommand},
		{name: "cover position_step", class: Cover, payload: `{"position_step":5}`, reason: ReasonRelativeCommand},
		{name: "unsupported class still unsupported", class: Sensor, payload: "TOGGLE", reason: ReasonUnsupported},
	})
}

func TestParseCommandAttributes(t *testing.T) {
	runParseCases(t, []parseCase{
		{name: "unknown light attribute", payload: `{"state":"ON","colour":"red"}`, reason: ReasonUnknownAttribute},
		{name: "attribute names are case-sensitive", payload: `{"State":"ON"}`, reason: ReasonUnknownAttribute},
		{name: "switch has no brightness", class: Switch, payload: `{"state":"ON","brightness":1}`, reason: ReasonUnknownAttribute},
		{name: "lock has no position", class: Lock, payload: `{"position":1}`, reason: ReasonUnknownAttribute},

		{name: "brightness 0", payload: `{"brightness":0}`, want: Command{Target: Target{"brightness": 0.0}}},
		{name: "brightness 254", payload: `{"brightness":254}`, want: Command{Target: Target{"brightness": 254.0}}},
		{name: "brightness -1", payload: `{"brightness":-1}`, reason: ReasonOutOfRange},
		{name: "brightness 256 (255 is Home Assistant's top, taken)", payload: `{"brightness":256}`, reason: ReasonOutOfRange},
		{name: "brightness written 1.28e2", payload: `{"brightness":1.28e2}`, want: Command{Target: Target{"brightness": 128.0}}},
		{name: "brightness 128.0 is whole", payload: `{"brightness":128.0}`, want: Command{Target: Target{"brightness": 128.0}}},
		{name: "brightness fractional", payload: `{"brightness":12.5}`, reason: ReasonInvalidValue},
		{name: "brightness fractional and out of range", payload: `{"brightness":254.5}`, reason: ReasonInvalidValue},
		{name: "brightness as a string", payload: `{"brightness":"128"}`, reason: ReasonInvalidValue},
		{name: "brightness boolean", payload: `{"brightness":true}`, reason: ReasonInvalidValue},
		{name: "brightness null", payload: `{"brightness":null}`, reason: ReasonInvalidValue},
		{name: "brightness object", payload: `{"brightness":{"v":1}}`, reason: ReasonInvalidValue},
		{name: "brightness beyond float64", payload: `{"brightness":1e400}`, reason: ReasonInvalidValue},
		{name: "color_temp 65279", payload: `{"color_temp":65279}`, want: Command{Target: Target{"color_temp": 65279.0}}},
		{name: "color_temp 65280", payload: `{"color_temp":65280}`, reason: ReasonOutOfRange},
		{name: "transition may be fractional", payload: `{"state":"OFF","transition":1.5}`, want: Command{Target: Target{"state": "OFF", "transition": 1.5}}},
		{name: "transition over an hour", payload: `{"state":"OFF","transition":3601}`, reason: ReasonOutOfRange},
		{name: "state number", payload: `{"state":1}`, reason: ReasonInvalidValue},
		{name: "state not in the enum", payload: `{"state":"DIM"}`, reason: ReasonInvalidValue},
		{name: "state boolean", payload: `{"state":true}`, reason: ReasonInvalidValue},

		{name: "cover position 0", class: Cover, payload: `{"position":0}`, want: Command{Target: Target{"position": 0.0}}},
		{name: "cover position 100", class: Cover, payload: `{"position":100}`, want: Command{Target: Target{"position": 100.0}}},
		{name: "cover position 101", class: Cover, payload: `{"position":101}`, reason: ReasonOutOfRange},
		{name: "cover position -1", class: Cover, payload: `{"position":-1}`, reason: ReasonOutOfRange},
		{name: "cover position fractional", class: Cover, payload: `{"position":40.5}`, reason: ReasonInvalidValue},
		{name: "cover tilt 100", class: Cover, payload: `{"tilt":100}`, want: Command{Target: Target{"tilt": 100.0}}},
		{name: "cover tilt 101", class: Cover, payload: `{"tilt":101}`, reason: ReasonOutOfRange},
		{name: "cover STOP", class: Cover, payload: "stop", want: Command{Target: Target{"state": "STOP"}}},
		{name: "cover ON is not a cover state", class: Cover, payload: "ON", reason: ReasonInvalidValue},
		{name: "lock ON is not a lock state", class: Lock, payload: "ON", reason: ReasonInvalidValue},
		{name: "switch OFF", class: Switch, payload: `{"state":"off"}`, want: Command{Target: Target{"state": "OFF"}}},
	})
}

// A thermostat takes its heating setpoints (°C, 5–35, halves allowed).
func TestParseCommandClimate(t *testing.T) {
	runParseCases(t, []parseCase{
		{name: "setpoint", class: Climate, payload: `{"current_heating_setpoint":21.5}`, want: Command{Target: Target{"current_heating_setpoint": 21.5}}},
		{name: "setpoint too high", class: Climate, payload: `{"current_heating_setpoint":40}`, reason: ReasonOutOfRange},
		{name: "no state", class: Climate, payload: `ON`, reason: ReasonUnknownAttribute},
	})
}

func TestParseCommandClassesWithoutSchemaAreUnsupported(t *testing.T) {
	var cases []parseCase
	for _, c := range []Class{Valve, Alarm, Sensor, Class("toaster"), Class("")} {
		cases = append(cases,
			parseCase{name: string(c) + " plain", class: c, payload: "ON", reason: ReasonUnsupported},
			parseCase{name: string(c) + " object", class: c, payload: `{"state":"ON"}`, reason: ReasonUnsupported},
		)
	}
	// runParseCases maps an empty class to Light; call ParseCommand directly
	// for the empty class.
	runParseCases(t, cases[:len(cases)-2])
	if _, err := ParseCommand("", []byte("ON")); ReasonOf(err) != ReasonUnsupported {
		t.Errorf("ParseCommand(\"\", ON) = %v, want reason %s", err, ReasonUnsupported)
	}
}

// A command is parsed whole or not at all: reserved keys are checked before
// the target, and a bad reserved key wins over a valid target.
func TestParseCommandReservedKeyErrorsComeFirst(t *testing.T) {
	runParseCases(t, []parseCase{
		{name: "bad op_id with good target", payload: `{"state":"ON","op_id":""}`, reason: ReasonInvalidOpID},
		{name: "bad ttl with good target", payload: `{"state":"ON","ttl":"x"}`, reason: ReasonInvalidTTL},
		{name: "bad issued_at with good target", payload: `{"state":"ON","issued_at":"x"}`, reason: ReasonInvalidIssuedAt},
		{name: "bad op_id with unknown attribute", payload: `{"nope":1,"op_id":5}`, reason: ReasonInvalidOpID},
	})
}

func TestReasonOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Reason
	}{
		{"direct", &Error{Reason: ReasonOutOfRange}, ReasonOutOfRange},
		{"wrapped", errorsJoin(&Error{Reason: ReasonInvalidTTL}), ReasonInvalidTTL},
		{"foreign error", errors.New("boom"), ReasonInvalidPayload},
	}
	for _, tc := range tests {
		if got := ReasonOf(tc.err); got != tc.want {
			t.Errorf("%s: ReasonOf(%v) = %s, want %s", tc.name, tc.err, got, tc.want)
		}
	}
	e := &Error{Reason: ReasonOutOfRange, Detail: "brightness must be within 0–254, got 300"}
	if got, want := e.Error(), "out_of_range: brightness must be within 0–254, got 300"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func errorsJoin(err error) error { return errors.Join(errors.New("context"), err) }

// A rejection carries the caller's op_id when the payload holds a valid
// one under the exact key, whatever else is wrong with it.
func TestPeekOpIDReadsOnlyAValidOpIDUnderTheExactKey(t *testing.T) {
	for payload, want := range map[string]string{
		`{"op_id":"unlock-1","state":"TOGGLE"}`: "unlock-1",
		`{"OP_ID":"unlock-1"}`:                  "",
		`{"op_id":1}`:                           "",
		`{"op_id":"has space"}`:                 "",
		`"ON"`:                                  "",
		``:                                      "",
	} {
		if got := PeekOpID([]byte(payload)); got != want {
			t.Errorf("PeekOpID(%s) = %q, want %q", payload, got, want)
		}
	}
}
