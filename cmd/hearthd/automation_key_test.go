package main

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
)

// The key of the automations' op_ids is drawn once, kept in the data
// directory readable by Hearth alone, and the same on every start: the
// op_ids of one event stay the same across a restart.
func TestAutomationKeyIsKeptInTheDataDirectory(t *testing.T) {
	dir := t.TempDir()
	first, err := automationKey(dir, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != automationKeySize {
		t.Fatalf("key of %d bytes; want %d", len(first), automationKeySize)
	}
	again, err := automationKey(dir, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Errorf("keys %x and %x on two starts; want the same", first, again)
	}
	info, err := os.Stat(filepath.Join(dir, automationKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("key file mode %v; want 0600", perm)
	}
	other, err := automationKey(t.TempDir(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, other) {
		t.Errorf("one key %x for two data directories; want two", first)
	}
}

// A key file that is not a key (cut short by hand, another file in its
// place) is an error that names it, not a new key: a new key would give
// the next redelivered event a new op_id.
func TestDamagedAutomationKeyIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, automationKeyFile), []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := automationKey(dir, rand.Reader)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(automationKeyFile)) {
		t.Errorf("automationKey() error %v; want one naming %s", err, automationKeyFile)
	}
}
