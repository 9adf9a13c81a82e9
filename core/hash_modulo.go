package core

// url_hash's modulo mode is nginx's plain "hash $key"
// (ngx_http_upstream_get_hash_peer), choice for choice:
//
//	try t = 0, 1, ...: crc = crc32(t == 0 ? key : decimal(t) + key)
//	hash += (crc >> 16) & 0x7fff          (hash starts at 0 and accumulates)
//	w = hash % total weight, then nginx's weight walk over every member
//
// up to 20 retries, then round robin; an empty key goes to round robin
// straight away. Adding or removing a backend remaps most keys; ketama or
// maglev do not.

type moduloHash struct {
	walk weightWalk
}

func newModulo(g *group) *moduloHash {
	s := &moduloHash{walk: newWeightWalk(g)}
	if len(g.members) >= 2 {
		// The first try's hash is bits 16-30 of the CRC: look holds its
		// walk for each top half of the CRC, read as ketama's buckets are.
		look := make([]int32, 1<<16)
		for h := range look {
			look[h] = int32(walkFind(&s.walk, int64(h&0x7fff)%g.totalWeight))
		}
		g.lookShift = 16
		g.setTable(tableCRC, lookIndices(g, look))
	}
	return s
}

func (s *moduloHash) pick(g *group, req request) int {
	r := &req
	if len(g.members) < 2 || r.key == "" {
		return fallback(g, r)
	}
	total := uint64(g.totalWeight)
	var hash uint32 // nginx's uint32_t: it accumulates and may wrap
	for try := 0; try <= hashTries; try++ {
		crc := ^crcUpdate(rehashCRC[try], r.key)
		hash += crc >> 16 & 0x7fff
		pos := walkFind(&s.walk, int64(uint64(hash)%total))
		if usable(r, g.members[pos]) {
			return pos
		}
	}
	return fallback(g, r)
}
