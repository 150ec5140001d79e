package worker

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// fakeEnv is a stand-in environment for withEnv.
func fakeEnv(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func mustEnv(t *testing.T, c Connection, vars map[string]string) Connection {
	t.Helper()
	got, err := c.withEnv(fakeEnv(vars))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestConnectionDefaultsToPlaintextOnTheDefaultAddress(t *testing.T) {
	c := mustEnv(t, Connection{}, nil)
	if c.Target() != "127.0.0.1:7233" {
		t.Fatalf("target %q", c.Target())
	}
	if cfg, err := c.tlsConfig(); cfg != nil || err != nil {
		t.Fatalf("tls %v, %v: want plaintext", cfg, err)
	}
	if tok, err := c.BearerToken(); tok != "" || err != nil {
		t.Fatalf("token %q, %v: want none", tok, err)
	}
}

func TestConnectionReadsEveryVariable(t *testing.T) {
	c := mustEnv(t, Connection{}, map[string]string{
		"WIGGLE_ADDRESS":         "wiggle.internal:7233",
		"WIGGLE_AUTH_TOKEN":      "secret",
		"WIGGLE_TLS":             "1",
		"WIGGLE_TLS_CA":          "/ca.pem",
		"WIGGLE_TLS_CERT":        "/c.pem",
		"WIGGLE_TLS_KEY":         "/k.pem",
		"WIGGLE_TLS_SERVER_NAME": "wiggle",
	})
	want := Connection{Address: "wiggle.internal:7233", Token: "secret", TLS: true,
		CA: "/ca.pem", Cert: "/c.pem", Key: "/k.pem", ServerName: "wiggle"}
	if c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
}

func TestWiggleTLSValues(t *testing.T) {
	for v, on := range map[string]bool{"1": true, "true": true, "YES": true, " on ": true,
		"0": false, "false": false, "No": false, "off": false, "": false} {
		c := mustEnv(t, Connection{}, map[string]string{"WIGGLE_TLS": v})
		if c.TLS != on {
			t.Errorf("WIGGLE_TLS=%q: TLS %v, want %v", v, c.TLS, on)
		}
	}
	_, err := Connection{}.withEnv(fakeEnv(map[string]string{"WIGGLE_TLS": "maybe"}))
	if err == nil || !strings.Contains(err.Error(), `WIGGLE_TLS="maybe" is not one of`) {
		t.Fatalf("err %v: want one naming WIGGLE_TLS", err)
	}
}

func TestAnyTLSSettingImpliesTLS(t *testing.T) {
	c := mustEnv(t, Connection{}, map[string]string{"WIGGLE_TLS_SERVER_NAME": "wiggle"})
	cfg, err := c.tlsConfig()
	if err != nil || cfg == nil || cfg.ServerName != "wiggle" {
		t.Fatalf("tls %+v, %v: want TLS checking the name wiggle", cfg, err)
	}
}

func TestAFieldWinsOverItsVariable(t *testing.T) {
	c := mustEnv(t, Connection{Address: "explicit:2", Token: "explicit"}, map[string]string{
		"WIGGLE_ADDRESS":         "env:1",
		"WIGGLE_AUTH_TOKEN_FILE": "/no/such/token",
		"WIGGLE_TLS_SERVER_NAME": "env-name",
	})
	if c.Address != "explicit:2" || c.Token != "explicit" || c.TokenFile != "" {
		t.Fatalf("got %+v: the explicit address and token must win, the token file be ignored", c)
	}
	if c.ServerName != "env-name" { // what the fields leave unset still comes from the variables
		t.Fatalf("server name %q", c.ServerName)
	}
}

func TestATokenAndATokenFileTogetherAreRefused(t *testing.T) {
	_, err := Connection{}.withEnv(fakeEnv(map[string]string{
		"WIGGLE_AUTH_TOKEN": "a", "WIGGLE_AUTH_TOKEN_FILE": "/t"}))
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("err %v", err)
	}
	if _, err := (Connection{Token: "a", TokenFile: "/t"}).BearerToken(); err == nil {
		t.Fatal("both in code: want an error")
	}
}

func TestTheTokenFileIsReadAndTrimmed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	if err := os.WriteFile(path, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := mustEnv(t, Connection{}, map[string]string{"WIGGLE_AUTH_TOKEN_FILE": path})
	if tok, err := c.BearerToken(); tok != "from-file" || err != nil {
		t.Fatalf("token %q, %v", tok, err)
	}
	if err := os.WriteFile(path, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BearerToken(); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("err %v: want the empty file named", err)
	}
}

func TestBadTLSSettingsAreRefusedByName(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-ca.pem")
	for _, tc := range []struct {
		c    Connection
		want string
	}{
		{Connection{Cert: "/c.pem"}, "both a client certificate and its key"},
		{Connection{Key: "/k.pem"}, "both a client certificate and its key"},
		{Connection{CA: missing}, "cannot read the TLS CA"},
	} {
		if _, err := tc.c.Dial(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.c, err, tc.want)
		}
	}
}

// selfSigned writes a CA-less self-signed certificate for "wiggle.test" and its key, PEM.
func selfSigned(t *testing.T) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "wiggle.test"},
		DNSNames: []string{"wiggle.test"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	for path, block := range map[string]*pem.Block{
		certPath: {Type: "CERTIFICATE", Bytes: der}, keyPath: {Type: "PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certPath, keyPath
}

// A connection made from the variables speaks TLS to a server whose certificate the CA
// variable names, checking the name WIGGLE_TLS_SERVER_NAME gives (not the address's host).
func TestDialSpeaksTLSFromTheVariables(t *testing.T) {
	certPath, keyPath := selfSigned(t)
	serverCreds, err := credentials.NewServerTLSFromFile(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(serverCreds))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	c := mustEnv(t, Connection{}, map[string]string{
		"WIGGLE_ADDRESS": lis.Addr().String(), "WIGGLE_TLS_CA": certPath,
		"WIGGLE_TLS_SERVER_NAME": "wiggle.test"})
	conn, err := c.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health check over TLS: %v", err)
	}
}
