package yaegitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a certificate authority made for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "lbpack test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a certificate for the DNS names and IPs given (a client
// certificate when client is true), returning it and its key as PEM.
func (ca *testCA) issue(t *testing.T, client bool, dns []string, ips ...net.IP) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	usage := x509.ExtKeyUsageServerAuth
	if client {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "lbpack test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// tlsBackend is a loopback https server with the certificate given,
// asking clients for a certificate signed by clientCA when it is not nil.
func tlsBackend(t *testing.T, certPEM, keyPEM []byte, clientCA *testCA) *httptest.Server {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secret")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	if clientCA != nil {
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		srv.TLS.ClientCAs = x509.NewCertPool()
		srv.TLS.ClientCAs.AddCert(clientCA.cert)
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// writeFile writes data to a file of the test's and returns its path.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// indent indents every line of s by n spaces, for a YAML block scalar.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

// TestPluginTLS: the servers' TLS settings against loopback https servers
// whose certificates a CA of the test's signs: an unknown CA is refused
// (502, and one ERROR line naming the x509 error for two requests); rootCAs
// as a file or as PEM text, and insecureSkipVerify, are accepted; a
// certificate for another name needs serverName; a server that asks for
// a client certificate gets certFile and keyFile.
func TestPluginTLS(t *testing.T) {
	l := loadPlugin(t, nil)
	ca := newTestCA(t)
	cert, key := ca.issue(t, false, nil, net.ParseIP("127.0.0.1"))
	plain := tlsBackend(t, cert, key, nil)
	namedCert, namedKey := ca.issue(t, false, []string{"backend.test"})
	named := tlsBackend(t, namedCert, namedKey, nil)
	mutual := tlsBackend(t, cert, key, ca)
	clientCert, clientKey := ca.issue(t, true, []string{"client.test"})
	caFile := writeFile(t, "ca.pem", ca.pem)
	certFile, keyFile := writeFile(t, "client.pem", clientCert), writeFile(t, "client.key", clientKey)
	for _, c := range []struct {
		name, tls, server string
		status            int
		log               string // the ERROR line's cause, for a 502
	}{
		{"unknown CA", "", plain.URL, 502, "x509: certificate signed by unknown authority"},
		{"rootCAs file", "tls:\n  rootCAs: [" + caFile + "]\n", plain.URL, 200, ""},
		{"rootCAs text", "tls:\n  rootCAs:\n    - |\n" + indent(string(ca.pem), 6) + "\n", plain.URL, 200, ""},
		{"insecureSkipVerify", "tls:\n  insecureSkipVerify: true\n", plain.URL, 200, ""},
		{"another name", "tls:\n  rootCAs: [" + caFile + "]\n", named.URL, 502, "x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs"},
		{"serverName", "tls:\n  rootCAs: [" + caFile + "]\n  serverName: backend.test\n", named.URL, 200, ""},
		{"no client certificate", "tls:\n  rootCAs: [" + caFile + "]\n", mutual.URL, 502, "tls: certificate required"},
		{"client certificate", "tls:\n  rootCAs: [" + caFile + "]\n  certFile: " + certFile + "\n  keyFile: " + keyFile + "\n", mutual.URL, 200, ""},
	} {
		before := len(l.stderr.lines())
		base, client := front(t, pluginNamed(t, l, c.tls+serversYAML([]string{c.server}), c.name))
		for k := 0; k < 2; k++ {
			if r := do(t, client, "GET", base+"/", ""); r.status != c.status || c.status == 200 && r.body != "secret" {
				t.Errorf("%s: request %d: status %d %q, want %d", c.name, k, r.status, r.body, c.status)
			}
		}
		lines := l.stderr.lines()[before:]
		prefix := `lbpack middleware "` + c.name + `": server ` + c.server + ": no answer: "
		if c.log == "" && len(lines) != 0 || c.log != "" && (len(lines) != 1 || !strings.HasPrefix(lines[0], prefix) || !strings.HasSuffix(lines[0], c.log+"\n")) {
			t.Errorf("%s: error log %q, want one line %q", c.name, lines, prefix+"..."+c.log)
		}
	}
}

// TestPluginTLSErrors: a TLS setting that cannot be used is refused at
// New, in the user's words.
func TestPluginTLSErrors(t *testing.T) {
	l := loadPlugin(t, nil)
	ca := newTestCA(t)
	cert, key := ca.issue(t, true, []string{"client.test"})
	certFile := writeFile(t, "client.pem", cert)
	keyFile := writeFile(t, "client.key", key)
	notPEM := writeFile(t, "ca.txt", []byte("not a certificate"))
	for _, c := range []struct{ tls, want string }{
		{"rootCAs: [/nonexistent/ca.pem]", `tls.rootCAs[0] "/nonexistent/ca.pem": neither PEM text nor a readable file`},
		{"rootCAs: [" + notPEM + "]", `tls.rootCAs[0] "` + notPEM + `": no PEM certificate in it`},
		{"certFile: " + certFile, "tls: certFile and keyFile go together"},
		{"certFile: " + certFile + "\n  keyFile: " + certFile, `tls.certFile "` + certFile + `", tls.keyFile "` + certFile + `": tls: `},
		{"certFile: " + keyFile + "\n  keyFile: " + keyFile, `tls.certFile "` + keyFile + `"`},
		{"severName: x", "tls.severName: unknown key (did you mean serverName?)"},
	} {
		_, err := l.newHandler(t.Context(), "tls:\n  "+c.tls+"\n"+serversYAML([]string{"https://127.0.0.1:1"}), "lb")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("tls %q: error %v, want %q", c.tls, err, c.want)
		}
	}
	_, err := l.newHandler(t.Context(), "mode: steer\ncookie: lb\ntls:\n  insecureSkipVerify: true\n"+serversYAML([]string{"https://127.0.0.1:1"}), "lb")
	if want := "tls: proxy mode only; in steer mode Traefik proxies, so set it in the service's serversTransport"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("tls in steer mode: error %v, want %q", err, want)
	}
}
