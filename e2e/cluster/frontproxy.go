package cluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// frontProxyClient is the common name of the client certificate that
// kube-apiserver presents to aggregated API servers, and the one name it
// accepts in requestheader authentication.
const frontProxyClient = "front-proxy-client"

// frontProxyFlags writes a front-proxy CA and the client certificate it
// signs into dir and returns kube-apiserver's flags that use them: the
// aggregation layer proxies a request for an APIService to its server with
// that certificate and the X-Remote-* headers, as a kubeadm cluster does.
// Rancher serves its imperative API (ext.cattle.io) that way.
func frontProxyFlags(dir string) ([]string, error) {
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate front-proxy CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "front-proxy-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign front-proxy CA: %w", err)
	}
	clientKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate front-proxy client key: %w", err)
	}
	clientTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: frontProxyClient},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse front-proxy CA: %w", err)
	}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTmpl, caCert, &clientKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign front-proxy client certificate: %w", err)
	}
	files := map[string]*pem.Block{
		"front-proxy-ca.crt":     {Type: "CERTIFICATE", Bytes: caDER},
		"front-proxy-client.crt": {Type: "CERTIFICATE", Bytes: clientDER},
		"front-proxy-client.key": {Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(clientKey)},
	}
	for name, block := range files {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return []string{
		"--requestheader-client-ca-file=" + filepath.Join(dir, "front-proxy-ca.crt"),
		"--requestheader-allowed-names=" + frontProxyClient,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + filepath.Join(dir, "front-proxy-client.crt"),
		"--proxy-client-key-file=" + filepath.Join(dir, "front-proxy-client.key"),
	}, nil
}
