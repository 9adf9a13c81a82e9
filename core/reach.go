package core

// The first try of ip_hash and of url_hash's modulo mode walks the weight
// line at hash % total weight, and that hash has a bounded range: below 6271
// for ip_hash, 15 bits of a CRC for modulo. When the total weight exceeds
// the range, the members whose share of the line starts past it are never
// a first choice: they get keys only when an earlier choice is unavailable.
// That is nginx's behaviour, kept; Unreachable lets a host warn of it.

// moduloSpan is the range of url_hash modulo's first hash, (crc >> 16) & 0x7fff.
const moduloSpan = 0x7fff + 1

// Unreachable returns the indexes, into backends, of the backends that the
// first try of the strategy's weight walk never picks, and the walk's span:
// the hash values the first try takes (6271 for ip_hash, 32768 for
// url_hash's modulo mode). A total weight up to the span reaches every
// backend. Other strategies and hash modes have no such bound: nil, 0.
// Backup backends are not in the walk (the hash strategies refuse them).
func Unreachable(strategy, hashMode string, backends []Backend) ([]int, int) {
	span := 0
	switch {
	case strategy == IPHash:
		span = ipHashMod
	case strategy == URLHash && hashMode == HashModulo:
		span = moduloSpan
	default:
		return nil, 0
	}
	total := int64(0)
	for _, b := range backends {
		if !b.Backup {
			total += int64(b.Weight)
		}
	}
	if total <= int64(span) {
		return nil, span
	}
	// hash % total is the hash itself: the walk reaches [0, span) only.
	var far []int
	start := int64(0)
	for i, b := range backends {
		if b.Backup {
			continue
		}
		if start >= int64(span) {
			far = append(far, i)
		}
		start += int64(b.Weight)
	}
	return far, span
}
