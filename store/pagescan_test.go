package store

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// leafPage builds a leaf page of pageSize bytes holding kvs (key, value,
// key, value, …) as bbolt lays one out.
func leafPage(pageSize int, kvs ...string) []byte {
	p := make([]byte, pageSize)
	binary.LittleEndian.PutUint16(p[8:], pageFlagLeaf)
	binary.LittleEndian.PutUint16(p[10:], uint16(len(kvs)/2))
	data := pageHeaderSize + leafElementSize*len(kvs)/2
	for i := 0; i < len(kvs); i += 2 {
		at := pageHeaderSize + leafElementSize*i/2
		e := p[at:]
		binary.LittleEndian.PutUint32(e[4:], uint32(data-at))
		binary.LittleEndian.PutUint32(e[8:], uint32(len(kvs[i])))
		binary.LittleEndian.PutUint32(e[12:], uint32(len(kvs[i+1])))
		data += copy(p[data:], kvs[i])
		data += copy(p[data:], kvs[i+1])
	}
	return p
}

func TestScanLeafReadsElementsAndInlineBuckets(t *testing.T) {
	inline := leafPage(64, "k", "v")
	bucketValue := append(make([]byte, bucketHeaderSize), inline...)
	binary.LittleEndian.PutUint64(bucketValue[8:], 41) // sequence
	p := leafPage(4096, "a", "1", "states", string(bucketValue))
	binary.LittleEndian.PutUint32(p[pageHeaderSize+leafElementSize:], elementFlagBucket)
	var got []string
	scanLeaf(p, 0, func(k, v []byte, bucket bool) {
		if bucket {
			got = append(got, "bucket "+string(k))
			return
		}
		got = append(got, string(k)+"="+string(v))
	})
	want := []string{"a=1", "bucket states", "k=v"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("scanLeaf = %q, want %q", got, want)
	}
	sv := newSalvage()
	sv.bucketSeq([]byte("states"), bucketValue)
	if sv.seqs["states"] != 41 {
		t.Errorf("bucket sequence = %d, want 41", sv.seqs["states"])
	}
}

// A count or a length past the page's end reads nothing beyond it.
func TestScanLeafStaysInsideThePage(t *testing.T) {
	p := leafPage(64, "a", "1")
	binary.LittleEndian.PutUint16(p[10:], 0xffff)               // count
	binary.LittleEndian.PutUint32(p[pageHeaderSize+12:], 1<<31) // vsize of "a"
	n := 0
	scanLeaf(p, 0, func(k, v []byte, _ bool) {
		n++
		if len(k)+len(v) > 0 { // the zero bytes after it read as empty elements
			t.Errorf("visited %q=%q", k, v)
		}
	})
	if n != 2 {
		t.Errorf("visited %d elements; want the 2 more that fit in the page", n)
	}
}

// aliased returns a leaf page of size bytes whose n elements all point
// at one bucket value, whose inline page is aliased(…, depth-1): read
// naively, n^depth elements.
func aliased(size, n, depth int) []byte {
	p := make([]byte, size)
	binary.LittleEndian.PutUint16(p[8:], pageFlagLeaf)
	binary.LittleEndian.PutUint16(p[10:], uint16(n))
	value := pageHeaderSize + n*leafElementSize
	var child []byte
	if depth > 0 {
		child = aliased(size-value-bucketHeaderSize, n, depth-1)
		copy(p[value+bucketHeaderSize:], child)
	}
	for i := range n {
		at := pageHeaderSize + i*leafElementSize
		e := p[at:]
		if depth > 0 {
			binary.LittleEndian.PutUint32(e[0:], elementFlagBucket)
			binary.LittleEndian.PutUint32(e[12:], uint32(bucketHeaderSize+len(child)))
		}
		binary.LittleEndian.PutUint32(e[4:], uint32(value-at))
	}
	return p
}

// Inline bucket pages that alias each other are read within a budget,
// not exponentially.
func TestScanLeafBoundsAliasedInlinePages(t *testing.T) {
	const size, n = 4096, 40
	p := aliased(size, n, maxInlineDepth)
	visits := 0
	scanLeaf(p, 0, func([]byte, []byte, bool) { visits++ })
	if visits == 0 || visits > size/leafElementSize {
		t.Errorf("visited %d elements of a %d-byte page; want some, at most %d", visits, size, size/leafElementSize)
	}
}

func TestFilePageSizeReadsAValidMetaPage(t *testing.T) {
	dir, _ := richStore(t, 10)
	f, err := os.Open(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	if got := filePageSize(f, fi.Size()); got != os.Getpagesize() {
		t.Errorf("filePageSize = %d, want %d (bbolt's default)", got, os.Getpagesize())
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	b[pageHeaderSize] ^= 0xff // meta 0's magic: page 1 still says
	if got := filePageSize(bytes.NewReader(b), fi.Size()); got != os.Getpagesize() {
		t.Errorf("filePageSize from meta 1 = %d", got)
	}
}

// FuzzScanPages: the raw scanner never panics and never hands out bytes
// from outside its input, whatever the bytes and the page size.
func FuzzScanPages(f *testing.F) {
	f.Add([]byte{}, uint16(4096))
	f.Add(leafPage(64, "a", "1", "bb", "22"), uint16(64))
	f.Add(leafPage(128, "k", "\x01\x00\x00\x00\x00{}"), uint16(16))
	dir := filledStore(f, 20)
	if b, err := os.ReadFile(filepath.Join(dir, FileName)); err == nil {
		f.Add(b[:min(len(b), 4*4096)], uint16(4096))
	}
	f.Fuzz(func(t *testing.T, data []byte, pageSize uint16) {
		inside := func(k, v []byte, _ bool) {
			for _, s := range [][]byte{k, v} {
				if len(s) > len(data) {
					t.Fatalf("a slice of %d bytes from %d bytes of input", len(s), len(data))
				}
			}
		}
		scanLeaf(data, 0, inside)
		if err := scanPages(bytes.NewReader(data), int64(len(data)), int(pageSize), inside); err != nil {
			t.Fatalf("scanPages: %v", err)
		}
		_ = filePageSize(bytes.NewReader(data), int64(len(data)))
		sv := newSalvage()
		_ = scanPages(bytes.NewReader(data), int64(len(data)), int(pageSize), func(k, v []byte, bucket bool) {
			if bucket {
				sv.bucketSeq(k, v)
				return
			}
			for _, b := range checksummed {
				sv.consider(b, k, v, false, false)
			}
			_ = guessBucket(k, v)
		})
	})
}
