package worker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// DefaultAddress is the server a Connection without an Address reaches, as in every SDK.
const DefaultAddress = "127.0.0.1:7233"

// Connection says how to reach a Wiggle server. Its fields are the WIGGLE_* connection
// variables of docs/worker-protocol.md ("Connection"); WithEnv fills in from them what is left
// unset, so a field set in code wins over its variable.
//
//	c, err := worker.Connection{}.WithEnv() // or Connection{Address: "h:7233"}.WithEnv()
//	conn, err := c.Dial()
//	token, err := c.BearerToken()
//	w := worker.New(wigglepb.NewWiggleClient(conn), worker.Options{Token: token})
type Connection struct {
	// Address is the server's host:port (any gRPC target). WIGGLE_ADDRESS; default
	// DefaultAddress.
	Address string
	// Token is the bearer token. WIGGLE_AUTH_TOKEN.
	Token string
	// TokenFile is a file holding the token, read by BearerToken. WIGGLE_AUTH_TOKEN_FILE.
	// Token and TokenFile are one setting: setting either ignores both variables.
	TokenFile string
	// TLS connects with TLS, trusting the system's roots unless CA says otherwise; any of the
	// fields below turns it on too. WIGGLE_TLS (1/true/yes/on, 0/false/no/off).
	TLS bool
	// CA is a PEM bundle of the CAs to trust. WIGGLE_TLS_CA.
	CA string
	// Cert and Key are the PEM client certificate chain and its key, for mutual TLS; both or
	// neither. WIGGLE_TLS_CERT, WIGGLE_TLS_KEY.
	Cert, Key string
	// ServerName is the name to verify in the server's certificate, when it is not the
	// address's host. WIGGLE_TLS_SERVER_NAME.
	ServerName string
}

// WithEnv returns c with what it leaves unset taken from the WIGGLE_* variables (an empty
// variable counts as unset). A WIGGLE_TLS that is neither on nor off, or both token variables
// set while c sets no token, is an error naming the variable.
func (c Connection) WithEnv() (Connection, error) {
	return c.withEnv(os.Getenv)
}

func (c Connection) withEnv(getenv func(string) string) (Connection, error) {
	fill := func(field *string, name string) {
		if *field == "" {
			*field = getenv(name)
		}
	}
	fill(&c.Address, "WIGGLE_ADDRESS")
	if c.Token == "" && c.TokenFile == "" {
		c.Token, c.TokenFile = getenv("WIGGLE_AUTH_TOKEN"), getenv("WIGGLE_AUTH_TOKEN_FILE")
		if c.Token != "" && c.TokenFile != "" {
			return c, errors.New("set WIGGLE_AUTH_TOKEN or WIGGLE_AUTH_TOKEN_FILE, not both")
		}
	}
	if v := getenv("WIGGLE_TLS"); v != "" && !c.TLS {
		on, err := tlsFlag(v)
		if err != nil {
			return c, err
		}
		c.TLS = on
	}
	fill(&c.CA, "WIGGLE_TLS_CA")
	fill(&c.Cert, "WIGGLE_TLS_CERT")
	fill(&c.Key, "WIGGLE_TLS_KEY")
	fill(&c.ServerName, "WIGGLE_TLS_SERVER_NAME")
	return c, nil
}

func tlsFlag(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("WIGGLE_TLS=%q is not one of 1, true, yes, on (TLS) or 0, false, no, off", v)
}

// Target is the address to dial: Address, or DefaultAddress.
func (c Connection) Target() string {
	if c.Address == "" {
		return DefaultAddress
	}
	return c.Address
}

// BearerToken is Token, or the content of TokenFile with surrounding whitespace dropped; both
// set, an unreadable file or an empty one is an error.
func (c Connection) BearerToken() (string, error) {
	if c.Token != "" && c.TokenFile != "" {
		return "", errors.New("give a token or a token file (WIGGLE_AUTH_TOKEN or WIGGLE_AUTH_TOKEN_FILE), not both")
	}
	if c.TokenFile == "" {
		return c.Token, nil
	}
	data, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("cannot read the token file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("the token file %s is empty", c.TokenFile)
	}
	return token, nil
}

// tlsConfig is the TLS c asks for, its files read now; nil for plaintext.
func (c Connection) tlsConfig() (*tls.Config, error) {
	if !c.TLS && c.CA == "" && c.Cert == "" && c.Key == "" && c.ServerName == "" {
		return nil, nil
	}
	if (c.Cert == "") != (c.Key == "") {
		return nil, errors.New("mutual TLS needs both a client certificate and its key (WIGGLE_TLS_CERT and WIGGLE_TLS_KEY), or neither")
	}
	cfg := &tls.Config{ServerName: c.ServerName, MinVersion: tls.VersionTLS12}
	if c.CA != "" {
		pem, err := os.ReadFile(c.CA)
		if err != nil {
			return nil, fmt.Errorf("cannot read the TLS CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the TLS CA %s holds no PEM certificate", c.CA)
		}
	}
	if c.Cert != "" {
		pair, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("cannot load the TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// Dial makes a gRPC client of the server (grpc.NewClient: it connects on first use), with
// TLS when c asks for it; opts come after c's own.
func (c Connection) Dial(opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	cfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	return grpc.NewClient(c.Target(), append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, opts...)...)
}
