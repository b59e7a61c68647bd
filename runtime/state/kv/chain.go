package kv

import (
	"crypto/sha256"
	"encoding/binary"
)

// chainHash returns the router's hash of one block of ids following the block whose
// digest is parent (nil for the first block of a sequence): SHA-256 over the parent's
// 32-byte digest, then each id as 4 little-endian bytes; the hash is the digest's first 8
// bytes read big-endian. It is token.BlockHashes one block at a time, which lets the index
// continue a chain from a parent it learnt from an earlier event. buf is scratch space.
func chainHash(parent *[sha256.Size]byte, ids []uint32, buf []byte) (digest [sha256.Size]byte, hash int64, scratch []byte) {
	buf = buf[:0]
	if parent != nil {
		buf = append(buf, parent[:]...)
	}
	for _, id := range ids {
		buf = binary.LittleEndian.AppendUint32(buf, id)
	}
	digest = sha256.Sum256(buf)
	return digest, int64(binary.BigEndian.Uint64(digest[:8])), buf
}
