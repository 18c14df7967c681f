// notation-signer, the Notary Project's signing and verification as notation does them, wired from
// the packages of the released notation-go and notation-core-go modules: the notation CLI's own
// module is not served by every Go module proxy. It does what tests need of notation and nothing
// more: make a test certificate, sign a manifest in a registry as an OCI referrer (JWS or COSE,
// optional expiry and signing time, extra signed attributes), attach a prepared envelope as a
// signature, and verify a reference against a notation configuration directory (trust policy and
// trust store) the way `notation verify` does.
//
//	notation-signer version
//	notation-signer cert -out NAME [-ca NAME] [-subject DN] [-not-before T] [-not-after T] [-eku codeSigning|serverAuth|none] [-key ec256|ec384|rsa2048] [-is-ca] [-ocsp URL] [-crl URL]
//	notation-signer sign -ref HOST/REPO@DIGEST -key KEY.pem -cert CHAIN.pem [-envelope jws|cose] [-expiry DUR] [-signing-time T] [-scheme notary.x509|notary.x509.signingAuthority] [-attr KEY=VALUE[!]]...
//	notation-signer attach -ref HOST/REPO@DIGEST -file ENVELOPE -media-type TYPE
//	notation-signer verify -ref HOST/REPO@DIGEST -config DIR
//
// Registries are reached over plain HTTP: tests run them on loopback.
package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/notaryproject/notation-core-go/signature"
	_ "github.com/notaryproject/notation-core-go/signature/cose"
	_ "github.com/notaryproject/notation-core-go/signature/jws"
	corex509 "github.com/notaryproject/notation-core-go/x509"
	"github.com/notaryproject/notation-go"
	"github.com/notaryproject/notation-go/dir"
	"github.com/notaryproject/notation-go/registry"
	"github.com/notaryproject/notation-go/verifier"
	"github.com/notaryproject/notation-go/verifier/trustpolicy"
	"github.com/notaryproject/notation-go/verifier/truststore"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"
)

const module = "github.com/notaryproject/notation-go"

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: notation-signer version|cert|sign|attach|verify [flags]"))
	}
	var err error
	switch os.Args[1] {
	case "version", "--version", "-version":
		fmt.Printf("notation-signer %s\n", moduleVersion())
	case "cert":
		err = certCmd(os.Args[2:])
	case "sign":
		err = signCmd(os.Args[2:])
	case "attach":
		err = attachCmd(os.Args[2:])
	case "verify":
		err = verifyCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "notation-signer: %v\n", err)
	os.Exit(2)
}

func moduleVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == module {
				return dep.Version
			}
		}
	}
	return "unknown"
}

func parseTime(s string, def time.Time) (time.Time, error) {
	if s == "" {
		return def, nil
	}
	return time.Parse(time.RFC3339, s)
}

// certCmd writes NAME.key and NAME.crt (the certificate followed by its issuer's chain, leaf
// first, as notation's signing key files are laid out).
func certCmd(args []string) error {
	fs := flag.NewFlagSet("cert", flag.ExitOnError)
	out := fs.String("out", "", "path prefix of the key and certificate to write")
	caName := fs.String("ca", "", "path prefix of the issuing CA (self-signed when empty)")
	subject := fs.String("subject", "CN=test,O=fastpull,C=US", "subject DN (CN, O, OU, L, ST, C)")
	notBefore := fs.String("not-before", "", "RFC 3339 start of validity (default: an hour ago)")
	notAfter := fs.String("not-after", "", "RFC 3339 end of validity (default: in 30 days)")
	eku := fs.String("eku", "codeSigning", "extended key usage: codeSigning, serverAuth or none")
	keyType := fs.String("key", "ec256", "key type: ec256, ec384 or rsa2048")
	isCA := fs.Bool("is-ca", false, "a CA certificate (keyCertSign, basic constraints CA)")
	ocsp := fs.String("ocsp", "", "OCSP responder URL to name in the certificate")
	crl := fs.String("crl", "", "CRL distribution point URL to name in the certificate")
	_ = fs.Parse(args)
	if *out == "" {
		return errors.New("cert: -out is required")
	}
	now := time.Now()
	nb, err := parseTime(*notBefore, now.Add(-time.Hour))
	if err != nil {
		return err
	}
	na, err := parseTime(*notAfter, now.Add(30*24*time.Hour))
	if err != nil {
		return err
	}
	var key crypto.Signer
	switch *keyType {
	case "ec256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ec384":
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "rsa2048":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		err = fmt.Errorf("cert: unknown key type %q", *keyType)
	}
	if err != nil {
		return err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      parseDN(*subject),
		NotBefore:    nb,
		NotAfter:     na,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if *ocsp != "" {
		tmpl.OCSPServer = []string{*ocsp}
	}
	if *crl != "" {
		tmpl.CRLDistributionPoints = []string{*crl}
	}
	if *isCA {
		tmpl.KeyUsage = x509.KeyUsageCertSign
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	} else {
		tmpl.BasicConstraintsValid = true
		switch *eku {
		case "codeSigning":
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}
		case "serverAuth":
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		}
	}
	parent, parentKey, chain := tmpl, crypto.Signer(key), []byte(nil)
	if *caName != "" {
		certs, err := corex509.ReadCertificateFile(*caName + ".crt")
		if err != nil {
			return err
		}
		k, err := corex509.ReadPrivateKeyFile(*caName + ".key")
		if err != nil {
			return err
		}
		parent, parentKey = certs[0], k.(crypto.Signer)
		chain, _ = os.ReadFile(*caName + ".crt")
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out+".key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	certPEM := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), chain...)
	return os.WriteFile(*out+".crt", certPEM, 0o644)
}

func parseDN(s string) pkix.Name {
	var n pkix.Name
	for _, part := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "CN":
			n.CommonName = v
		case "O":
			n.Organization = append(n.Organization, v)
		case "OU":
			n.OrganizationalUnit = append(n.OrganizationalUnit, v)
		case "L":
			n.Locality = append(n.Locality, v)
		case "ST":
			n.Province = append(n.Province, v)
		case "C":
			n.Country = append(n.Country, v)
		}
	}
	return n
}

type attrFlags []string

func (a *attrFlags) String() string     { return strings.Join(*a, ",") }
func (a *attrFlags) Set(v string) error { *a = append(*a, v); return nil }

// repository opens REF's repository over plain HTTP and resolves REF to its manifest.
func repository(ctx context.Context, ref string) (registry.Repository, ocispec.Descriptor, error) {
	r, err := remote.NewRepository(ref)
	if err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	r.PlainHTTP = true
	repo := registry.NewRepository(r)
	desc, err := repo.Resolve(ctx, r.Reference.Reference)
	return repo, desc, err
}

func envelopeType(name string) (string, error) {
	switch name {
	case "jws":
		return "application/jose+json", nil
	case "cose":
		return "application/cose", nil
	}
	return "", fmt.Errorf("unknown envelope %q (jws or cose)", name)
}

func signCmd(args []string) error {
	fs := flag.NewFlagSet("sign", flag.ExitOnError)
	ref := fs.String("ref", "", "reference of the manifest to sign (HOST/REPO@DIGEST or :TAG)")
	keyPath := fs.String("key", "", "signing key (PEM)")
	certPath := fs.String("cert", "", "certificate chain, leaf first (PEM)")
	envName := fs.String("envelope", "jws", "envelope format: jws or cose")
	expiry := fs.Duration("expiry", 0, "signature expiry after the signing time (0: none)")
	signingTime := fs.String("signing-time", "", "RFC 3339 signing time (default: now)")
	scheme := fs.String("scheme", string(signature.SigningSchemeX509), "signing scheme")
	var attrs attrFlags
	fs.Var(&attrs, "attr", "extra signed attribute KEY=VALUE; a trailing ! marks it critical")
	_ = fs.Parse(args)
	mediaType, err := envelopeType(*envName)
	if err != nil {
		return err
	}
	ctx := context.Background()
	repo, desc, err := repository(ctx, *ref)
	if err != nil {
		return err
	}
	key, err := corex509.ReadPrivateKeyFile(*keyPath)
	if err != nil {
		return err
	}
	certs, err := corex509.ReadCertificateFile(*certPath)
	if err != nil {
		return err
	}
	local, err := signature.NewLocalSigner(certs, key)
	if err != nil {
		return err
	}
	st, err := parseTime(*signingTime, time.Now())
	if err != nil {
		return err
	}
	payload, err := json.Marshal(map[string]any{"targetArtifact": ocispec.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}})
	if err != nil {
		return err
	}
	req := &signature.SignRequest{
		Payload:       signature.Payload{ContentType: "application/vnd.cncf.notary.payload.v1+json", Content: payload},
		Signer:        local,
		SigningTime:   st,
		SigningScheme: signature.SigningScheme(*scheme),
		SigningAgent:  "notation-signer/" + moduleVersion(),
	}
	if *expiry > 0 {
		req.Expiry = st.Add(*expiry)
	}
	for _, a := range attrs {
		k, v, _ := strings.Cut(a, "=")
		critical := strings.HasSuffix(v, "!")
		req.ExtendedSignedAttributes = append(req.ExtendedSignedAttributes, signature.Attribute{Key: k, Value: strings.TrimSuffix(v, "!"), Critical: critical})
	}
	env, err := signature.NewEnvelope(mediaType)
	if err != nil {
		return err
	}
	blob, err := env.Sign(req)
	if err != nil {
		return err
	}
	return push(ctx, repo, desc, mediaType, blob, certs)
}

func push(ctx context.Context, repo registry.Repository, subject ocispec.Descriptor, mediaType string, blob []byte, certs []*x509.Certificate) error {
	var thumbprints []string
	for _, c := range certs {
		sum := sha256.Sum256(c.Raw)
		thumbprints = append(thumbprints, hex.EncodeToString(sum[:]))
	}
	tp, _ := json.Marshal(thumbprints)
	annotations := map[string]string{"io.cncf.notary.x509chain.thumbprint#S256": string(tp)}
	_, manifest, err := repo.PushSignature(ctx, mediaType, blob, subject, annotations)
	if err != nil {
		return err
	}
	fmt.Println(manifest.Digest)
	return nil
}

func attachCmd(args []string) error {
	fs := flag.NewFlagSet("attach", flag.ExitOnError)
	ref := fs.String("ref", "", "reference of the manifest the envelope signs")
	file := fs.String("file", "", "the envelope's bytes")
	mediaType := fs.String("media-type", "application/jose+json", "the envelope's media type")
	_ = fs.Parse(args)
	ctx := context.Background()
	repo, desc, err := repository(ctx, *ref)
	if err != nil {
		return err
	}
	blob, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	return push(ctx, repo, desc, *mediaType, blob, nil)
}

type result struct {
	Type   string `json:"type"`
	Action string `json:"action"`
	Error  string `json:"error,omitempty"`
}

type report struct {
	Verified bool       `json:"verified"`
	Level    string     `json:"level,omitempty"`
	Error    string     `json:"error,omitempty"`
	Results  [][]result `json:"results"`
}

// verifyCmd prints a report as JSON and exits 0 when notation would accept the reference, 1 when
// it would refuse it.
func verifyCmd(args []string) error {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	ref := fs.String("ref", "", "reference to verify")
	config := fs.String("config", "", "notation configuration directory")
	maxSignatures := fs.Int("max-signatures", 50, "most signatures to evaluate")
	_ = fs.Parse(args)
	doc, err := loadPolicy(*config)
	if err != nil {
		return err
	}
	v, err := verifier.NewWithOptions(doc, truststore.NewX509TrustStore(dir.NewSysFS(*config)), nil, verifier.VerifierOptions{})
	if err != nil {
		return err
	}
	ctx := context.Background()
	repo, _, err := repository(ctx, *ref)
	if err != nil {
		return err
	}
	_, outcomes, verr := notation.Verify(ctx, v, repo, notation.VerifyOptions{ArtifactReference: *ref, MaxSignatureAttempts: *maxSignatures})
	rep := report{Verified: verr == nil, Results: [][]result{}}
	if verr != nil {
		rep.Error = verr.Error()
	}
	for _, o := range outcomes {
		if o.VerificationLevel != nil {
			rep.Level = o.VerificationLevel.Name
		}
		var rs []result
		for _, r := range o.VerificationResults {
			x := result{Type: string(r.Type), Action: string(r.Action)}
			if r.Error != nil {
				x.Error = r.Error.Error()
			}
			rs = append(rs, x)
		}
		rep.Results = append(rep.Results, rs)
	}
	out, _ := json.Marshal(rep)
	fmt.Println(string(out))
	if !rep.Verified {
		os.Exit(1)
	}
	return nil
}

// loadPolicy reads trustpolicy.oci.json, or trustpolicy.json where the former is absent, as the
// notation CLI does.
func loadPolicy(config string) (*trustpolicy.Document, error) {
	var data []byte
	var err error
	for _, name := range []string{"trustpolicy.oci.json", "trustpolicy.json"} {
		if data, err = os.ReadFile(config + "/" + name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	var doc trustpolicy.Document
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("malformed trust policy: %w", err)
	}
	return &doc, doc.Validate()
}
