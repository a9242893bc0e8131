package hearth_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hearthd/hearth/"

// allowed lists, per package of ours, the packages of ours it may import
// directly: the import rules of DESIGN.md ("Architecture"). A package
// missing here may import nothing of ours until it is added.
var allowed = map[string][]string{
	"devices":               {},
	"retry":                 {},
	"breaker":               {},
	"buildinfo":             {},
	"topic":                 {},
	"config":                {"devices", "retry", "breaker", "topic", "automations"},
	"configs":               {},
	"store":                 {"devices"},
	"broker":                {"topic"},
	"acl":                   {"topic"},
	"health":                {},
	"homeassistant":         {"devices"},
	"dispatcher":            {"devices", "retry", "breaker", "machine", "notify", "publish", "service"},
	"service":               {"breaker", "publish"},
	"publish":               {},
	"notify":                {"devices", "retry", "breaker"},
	"machine":               {"devices", "retry"},
	"automations":           {"devices", "topic"},
	"api":                   {"dispatcher", "health", "devices"},
	"simulator":             {"devices"},
	"protocols/mqtt":        {"retry", "topic"},
	"protocols/zigbee2mqtt": {"devices", "protocols/mqtt"},
	"protocols/zwavejs":     {"devices", "protocols/mqtt"},
	"protocols/shelly":      {"devices", "protocols/mqtt"},
	"protocols/tasmota":     {"devices", "protocols/mqtt"},
	"protocols/homie":       {"devices", "protocols/mqtt"},
	"protocols/esphome":     {"devices", "protocols/mqtt"},
	"protocols/webhook":     {"protocols/httpreq"},
	"protocols/httpreq":     {},
	"protocols/httpdev":     {"devices", "protocols/httpreq"},
	// The embedded broker of the adapters' tests: imported by tests only.
	"internal/testbroker": {},

	// The scenarios of hearth-sim: their logic, with the Hearth parts
	// they run against passed in through interfaces they own.
	"simulator/scenario/chart":      {},
	"simulator/scenario/progress":   {},
	"simulator/scenario/contention": {"retry", "simulator", "simulator/scenario/chart"},
	"simulator/scenario/powerloss":  {"broker", "retry", "simulator", "simulator/scenario/chart", "simulator/scenario/progress"},
	"simulator/scenario/outage":     {"broker", "retry", "simulator", "simulator/scenario/progress"},
	"simulator/scenario/sleepy":     {"broker", "devices", "simulator", "simulator/scenario/progress"},
}

// never lists what a package must not depend on even indirectly.
var never = map[string][]string{
	"dispatcher": {"store", "broker", "protocols/"},
	"notify":     {"store", "broker", "protocols/", "dispatcher"},
	"simulator":  {"protocols/"},
	"machine":    {"breaker", "store", "broker", "protocols/"},
	// A scenario catches the protocols' mistakes and checks the
	// dispatcher's, the machine's and the store's promises: it shares no
	// code with them.
	"simulator/scenario/chart":      {"protocols/", "dispatcher", "machine", "store"},
	"simulator/scenario/contention": {"protocols/", "dispatcher", "machine", "store"},
	"simulator/scenario/powerloss":  {"protocols/", "dispatcher", "machine", "store"},
	"simulator/scenario/outage":     {"protocols/", "dispatcher", "machine", "store"},
	"simulator/scenario/sleepy":     {"protocols/", "dispatcher", "machine", "store"},
}

// TestImportRules enforces DESIGN.md's import rules over `go list -deps`:
// leaves import nothing of ours, each room imports only what its row
// allows, the dispatcher depends on no concrete store, protocol or broker,
// the simulator and its scenarios share no code with the protocols (nor
// the scenarios with the dispatcher, the machine or the store), and
// nothing imports cmd.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}|{{join .Deps \",\"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.SplitN(line, "|", 3)
		pkg, ok := strings.CutPrefix(parts[0], module)
		if !ok {
			continue
		}
		imports := ours(parts[1])
		deps := ours(parts[2])
		for _, dep := range deps {
			if strings.HasPrefix(dep, "cmd/") {
				t.Errorf("%s depends on %s: nothing may import a command", pkg, dep)
			}
		}
		if strings.HasPrefix(pkg, "cmd/") {
			checked++
			continue
		}
		rule, known := allowed[pkg]
		if !known {
			t.Errorf("package %s has no row in the import rules: add it to DESIGN.md and this test", pkg)
			continue
		}
		checked++
		for _, imp := range imports {
			if !slices.Contains(rule, imp) {
				t.Errorf("%s imports %s; DESIGN.md allows only %v", pkg, imp, rule)
			}
		}
		for _, bad := range never[pkg] {
			for _, dep := range deps {
				if dep == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(dep, bad)) {
					t.Errorf("%s depends on %s, which it must never do", pkg, dep)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d packages of ours; go list output was not understood", checked)
	}
}

func ours(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ",") {
		if rest, ok := strings.CutPrefix(p, module); ok {
			out = append(out, rest)
		}
	}
	return out
}

// TestMachineIsPure enforces that the per-device state machine (package
// machine) has no goroutines, channels, locks or clock of its own in
// non-test code: it takes events and time as input and answers with what
// to do, so that a seeded schedule replays it exactly.
func TestMachineIsPure(t *testing.T) {
	files, err := filepath.Glob("machine/*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); p == "sync" || p == "sync/atomic" || p == "context" {
				t.Errorf("%s imports %s: the machine has no locks or cancellation of its own", name, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s starts a goroutine: the machine has none", name)
			case *ast.ChanType:
				t.Errorf("%s uses a channel: the machine has none", name)
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" {
					switch n.Sel.Name {
					case "Now", "Since", "Until", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick":
						t.Errorf("%s calls time.%s: time comes to the machine as input", name, n.Sel.Name)
					}
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no non-test files in machine/")
	}
}
