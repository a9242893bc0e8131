package store

import (
	"encoding/binary"
	"hash/fnv"
	"io"
	"os"
)

// The raw page scan reads a damaged bbolt file without bbolt: page by
// page, every leaf page's key/value elements, wherever the page sits in
// the tree or whether it is still in it (freed pages keep old versions
// of records). It trusts nothing it reads: every offset and length is
// checked against the bytes at hand, so arbitrary bytes never make it
// panic or read out of bounds (FuzzScanPages).
//
// The layout is bbolt's (go.etcd.io/bbolt v1.4, internal/common/page.go,
// meta.go, bucket.go), which bbolt writes in the machine's byte order:
// little-endian on every platform Hearth runs on (amd64, arm64, armv7).
//
//	page header, 16 bytes:   id u64 | flags u16 | count u16 | overflow u32
//	leaf element, 16 bytes:  flags u32 | pos u32 | ksize u32 | vsize u32
//	                         (key at the element's own offset + pos, value right after it)
//	bucket value:            root u64 | sequence u64, then, when root is 0,
//	                         the bucket's inline leaf page
//	meta (after the header): magic u32 | version u32 | pageSize u32 | flags u32 |
//	                         root 16 bytes | freelist u64 | pgid u64 | txid u64 |
//	                         checksum u64 (FNV-1a 64 over the 56 bytes before it)
const (
	pageHeaderSize    = 16
	leafElementSize   = 16
	bucketHeaderSize  = 16
	pageFlagLeaf      = 0x02
	elementFlagBucket = 0x01
	boltMagic         = 0xED0CDAED
	boltVersion       = 2
	metaChecksumAt    = pageHeaderSize + 56
	// maxInlineDepth bounds the recursion into inline buckets (Hearth's
	// buckets nest one level: the root's leaf holds the small ones).
	maxInlineDepth = 2
	// maxLeafSpan bounds the bytes read for one leaf page and its
	// overflow pages, whatever its header says.
	maxLeafSpan = 64 << 20
)

var le = binary.LittleEndian

// scanLeaf calls visit with the key and value of every element of p,
// one page's bytes (header first, overflow pages included), if it is a
// leaf page, and of the inline bucket pages inside it (to depth
// maxInlineDepth). bucket is true for a bucket element, whose value is
// the bucket's header (and inline page). key and value alias p; visit
// must copy what it keeps. It never panics and reads only within p, and
// it looks at no more elements in all than len(p)/16, the most an honest
// page holds, so that inline pages that alias each other cannot make it
// run long.
func scanLeaf(p []byte, depth int, visit func(key, value []byte, bucket bool)) {
	budget := len(p) / leafElementSize
	scanLeafWithin(p, depth, &budget, visit)
}

// scanLeafWithin is scanLeaf, counting the elements it looks at down
// from *budget and stopping at zero.
func scanLeafWithin(p []byte, depth int, budget *int, visit func(key, value []byte, bucket bool)) {
	if len(p) < pageHeaderSize || depth > maxInlineDepth || le.Uint16(p[8:10]) != pageFlagLeaf {
		return
	}
	count := int(le.Uint16(p[10:12]))
	for i := range count {
		if *budget <= 0 {
			return
		}
		*budget--
		at := pageHeaderSize + i*leafElementSize
		if at+leafElementSize > len(p) {
			return
		}
		e := p[at : at+leafElementSize]
		start := uint64(at) + uint64(le.Uint32(e[4:8]))
		kend := start + uint64(le.Uint32(e[8:12]))
		vend := kend + uint64(le.Uint32(e[12:16]))
		if vend > uint64(len(p)) {
			continue
		}
		key, value := p[start:kend:kend], p[kend:vend:vend]
		if le.Uint32(e[0:4])&elementFlagBucket != 0 {
			visit(key, value, true)
			if len(value) > bucketHeaderSize && le.Uint64(value[0:8]) == 0 {
				scanLeafWithin(value[bucketHeaderSize:], depth+1, budget, visit)
			}
			continue
		}
		visit(key, value, false)
	}
}

// scanPages reads r, size bytes in pages of pageSize bytes, and calls
// visit with every element of every leaf page in it (scanLeaf), in file
// order, a leaf's overflow pages read with it (at most maxLeafSpan bytes
// and never past size). Every page is looked at, overflow pages too, so a
// leaf whose overflow count is damaged hides nothing behind it. key and
// value are valid only during visit. A pageSize under pageHeaderSize
// scans nothing. It returns r's first read error other than io.EOF.
func scanPages(r io.ReaderAt, size int64, pageSize int, visit func(key, value []byte, bucket bool)) error {
	if pageSize < pageHeaderSize {
		return nil
	}
	var head [pageHeaderSize]byte
	var buf []byte
	for off := int64(0); off+pageHeaderSize <= size; off += int64(pageSize) {
		if _, err := r.ReadAt(head[:], off); err != nil && err != io.EOF {
			return err
		}
		if le.Uint16(head[8:10]) != pageFlagLeaf {
			continue
		}
		span := (int64(le.Uint32(head[12:16])) + 1) * int64(pageSize)
		span = min(span, size-off, maxLeafSpan)
		if int64(cap(buf)) < span {
			buf = make([]byte, span)
		}
		page := buf[:span]
		n, err := r.ReadAt(page, off)
		if err != nil && err != io.EOF {
			return err
		}
		scanLeaf(page[:n], 0, visit)
	}
	return nil
}

// filePageSize returns the page size of the bbolt file r (size bytes):
// that of the first valid meta page, page 0 at offset 0 or page 1 at
// one of the page sizes bbolt allows (1 KiB to 64 KiB), else
// os.Getpagesize(), which bbolt uses for new files.
func filePageSize(r io.ReaderAt, size int64) int {
	if ps, ok := metaPageSize(r, 0); ok {
		return ps
	}
	for ps := int64(1 << 10); ps <= 64<<10 && ps+metaChecksumAt+8 <= size; ps <<= 1 {
		if got, ok := metaPageSize(r, ps); ok && int64(got) == ps {
			return got
		}
	}
	return os.Getpagesize()
}

// metaPageSize reads a meta page at off and returns its page size if its
// magic, version and checksum are right and the size is a power of two
// from 1 KiB to 64 KiB.
func metaPageSize(r io.ReaderAt, off int64) (int, bool) {
	var m [metaChecksumAt + 8]byte
	if n, _ := r.ReadAt(m[:], off); n < len(m) {
		return 0, false
	}
	h := fnv.New64a()
	h.Write(m[pageHeaderSize:metaChecksumAt])
	ps := le.Uint32(m[pageHeaderSize+8:])
	if le.Uint32(m[pageHeaderSize:]) != boltMagic || le.Uint32(m[pageHeaderSize+4:]) != boltVersion ||
		le.Uint64(m[metaChecksumAt:]) != h.Sum64() || ps < 1<<10 || ps > 64<<10 || ps&(ps-1) != 0 {
		return 0, false
	}
	return int(ps), true
}
