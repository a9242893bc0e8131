package config

import (
	"fmt"
	"strconv"
	"strings"
)

// zwaveAddress reads the address of a device on a zwavejs service as the
// adapter does (protocols/zwavejs.ParseAddress, which config may not
// import; a test of cmd/hearthd keeps the two in step):
// [<location>/]<node>[/<endpoint>], each level sanitised as Z-Wave JS UI
// sanitises names for topics (api/lib/utils.ts, sanitizeTopic). It returns
// the node's sanitised levels and endpoint as one key ("<node>#<endpoint>"),
// so that two devices at one node and endpoint are found however their
// names are written, or what is wrong.
func zwaveAddress(addr string, nodeNames bool) (string, error) {
	levels := strings.Split(addr, "/")
	if len(levels) > 3 {
		return "", fmt.Errorf("%q is not a Z-Wave JS UI address: write <node>, <location>/<node> or either with /<endpoint>, as the gateway names the node in its topics", addr)
	}
	for i, l := range levels {
		levels[i] = zwaveSanitize(l)
		if levels[i] == "" {
			return "", fmt.Errorf("%q: level %q keeps no character once sanitised as Z-Wave JS UI does for topics (letters, digits, '-', '_', Latin-1 letters)", addr, l)
		}
	}
	if strings.HasPrefix(levels[0], "_") {
		return "", fmt.Errorf("%q is not a Z-Wave JS UI node: write <node> or <location>/<node>, as the gateway names the node in its topics", addr)
	}
	node, ep := strings.Join(levels, "/"), "0"
	switch {
	case len(levels) == 3:
		if !zwaveEndpoint(levels[2]) {
			return "", fmt.Errorf("%q: the third level %q is not an endpoint (0–127); write <location>/<node>/<endpoint>", addr, levels[2])
		}
		node, ep = levels[0]+"/"+levels[1], levels[2]
	case len(levels) == 2 && allDigits(levels[1]) && (allDigits(levels[0]) || nodeNames):
		if !zwaveEndpoint(levels[1]) {
			return "", fmt.Errorf("%q: endpoint %s is above 127", addr, levels[1])
		}
		node, ep = levels[0], levels[1]
	}
	if node == "driver" {
		return "", fmt.Errorf("%q: a node named driver would publish its status on the gateway's driver/status topic", addr)
	}
	n, _ := strconv.Atoi(ep)
	return node + "#" + strconv.Itoa(n), nil
}

func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func zwaveEndpoint(s string) bool {
	n, err := strconv.Atoi(s)
	return allDigits(s) && len(s) <= 3 && err == nil && n <= 127
}

// zwaveSanitize is Z-Wave JS UI's sanitizeTopic (api/lib/utils.ts): each
// JavaScript whitespace character becomes '_'; only A–Z, a–z, 0–9, '-',
// '_', '/' and U+00C0–U+00D6, U+00D8–U+00F6, U+00F8–U+00FF stay.
func zwaveSanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= '\t' && r <= '\r', r == ' ', r == 0xA0, r == 0x1680, r >= 0x2000 && r <= 0x200A,
			r == 0x2028, r == 0x2029, r == 0x202F, r == 0x205F, r == 0x3000, r == 0xFEFF:
			b.WriteByte('_')
		case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_', r == '/',
			r >= 0xC0 && r <= 0xD6, r >= 0xD8 && r <= 0xF6, r >= 0xF8 && r <= 0xFF:
			b.WriteRune(r)
		}
	}
	return b.String()
}
