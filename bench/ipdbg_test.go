package bench
import ("testing";"fmt";"net")
func nginxIP(ip string, n int) int {
	p := net.ParseIP(ip); var b []byte
	if v4 := p.To4(); v4 != nil { b = v4[:3] } else { b = p.To16() }
	h := 89
	for _, x := range b { h = (h*113 + int(x)) % 6271 }
	return h % n
}
func TestIPDbg(t *testing.T){
	keys := ClientIPs(qualityKeys)
	s, _ := FindSubject("lbpack ip_hash")
	p, _ := s.Build(Addrs(100), weightsFor(Hashed,100))
	c1 := map[int]int{}; c2 := map[int]int{}; agree := 0
	for _, k := range keys { a := p.PickKey(k); b := nginxIP(k,100); c1[a]++; c2[b]++; if a==b {agree++} }
	m1,m2:=0,0; for _,v:=range c1{ if v>m1{m1=v}}; for _,v:=range c2{ if v>m2{m2=v}}
	fmt.Println(m1, m2, agree, len(keys), keys[:5], keys[7])
	d := map[string]bool{}; for _, k := range keys { ip := net.ParseIP(k); if v:=ip.To4(); v!=nil { d[v[:3].String()]=true } }
	fmt.Println("distinct", len(d))
}
