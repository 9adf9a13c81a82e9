package traefikplugin

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// parseTLS builds the servers' TLS configuration, nil when t sets nothing
// (the standard library's defaults: the system's roots, each server's host
// as the name).
func parseTLS(t TLS) (*tls.Config, error) {
	if t.ServerName == "" && !t.InsecureSkipVerify && len(t.RootCAs) == 0 && t.CertFile == "" && t.KeyFile == "" {
		return nil, nil
	}
	c := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	if len(t.RootCAs) > 0 {
		c.RootCAs = x509.NewCertPool()
		for i, ca := range t.RootCAs {
			pem, err := pemOf(ca)
			if err != nil {
				return nil, fmt.Errorf("tls.rootCAs[%d] %q: %v", i, ca, err)
			}
			if !c.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("tls.rootCAs[%d] %q: no PEM certificate in it", i, ca)
			}
		}
	}
	if t.CertFile != "" || t.KeyFile != "" {
		if t.CertFile == "" || t.KeyFile == "" {
			return nil, errors.New("tls: certFile and keyFile go together (a client certificate and its key)")
		}
		cert, err := pemOf(t.CertFile)
		if err != nil {
			return nil, fmt.Errorf("tls.certFile %q: %v", t.CertFile, err)
		}
		key, err := pemOf(t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.keyFile %q: %v", t.KeyFile, err)
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("tls.certFile %q, tls.keyFile %q: %v", t.CertFile, t.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// pemOf returns PEM text given as itself or as a file's path.
func pemOf(v string) ([]byte, error) {
	if strings.Contains(v, "-----BEGIN ") {
		return []byte(v), nil
	}
	b, err := os.ReadFile(v)
	if err != nil {
		return nil, errors.New("neither PEM text nor a readable file")
	}
	return b, nil
}
