package token

import (
	"crypto/sha256"
	"encoding/binary"
)

// BlockHashes returns SGLang's page hash of every full block of blockSize ids. A trailing
// partial block has no hash, because engines cache only whole pages.
//
// The hash is the engine's, not the router's choice: SGLang publishes it in its KV events
// (python/sglang/srt/mem_cache/utils.py). Block i's digest is SHA-256 over block i-1's
// 32-byte digest (absent for block 0) followed by each id as a 4-byte little-endian
// unsigned integer; the published hash is the digest's first 8 bytes read as a big-endian
// signed integer. Reproducing it lets the router match a request's blocks against the
// hashes in BlockStored events directly. blockSize must be positive.
func BlockHashes(ids []uint32, blockSize int) []int64 {
	n := len(ids) / blockSize
	hashes := make([]int64, n)
	buf := make([]byte, 0, sha256.Size+4*blockSize)
	var digest [sha256.Size]byte
	for b := range n {
		buf = buf[:0]
		if b > 0 {
			buf = append(buf, digest[:]...)
		}
		for _, id := range ids[b*blockSize : (b+1)*blockSize] {
			buf = binary.LittleEndian.AppendUint32(buf, id)
		}
		digest = sha256.Sum256(buf)
		hashes[b] = int64(binary.BigEndian.Uint64(digest[:8]))
	}
	return hashes
}
