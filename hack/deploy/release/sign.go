package release

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// InTotoPayloadType is the DSSE payload type of in-toto statements.
const InTotoPayloadType = "application/vnd.in-toto+json"

// LoadSigner reads an unencrypted PEM private key (PKCS#8, SEC 1 EC or
// PKCS#1 RSA; ECDSA P-256 as `cosign generate-key-pair` makes, or Ed25519,
// whose signatures are deterministic) for signing with sigstore's signature
// package.
func LoadSigner(path string) (signature.SignerVerifier, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(b, cryptoutils.SkipPassword)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w (give an unencrypted PEM private key)", path, err)
	}
	sv, err := signature.LoadSignerVerifier(priv, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	return sv, nil
}

// PublicKeyPEM is the signer's public key as `cosign verify --key` reads it.
func PublicKeyPEM(s signature.Signer) ([]byte, error) {
	pub, err := s.PublicKey()
	if err != nil {
		return nil, err
	}
	return cryptoutils.MarshalPublicKeyToPEM(pub)
}

// SimpleSigningPayload is cosign's signed payload for an image (the
// "cosign container image signature" of sigstore/cosign
// specs/SIGNATURE_SPEC.md): the image's repository and manifest digest.
func SimpleSigningPayload(repo string, digest string) ([]byte, error) {
	d, err := name.NewDigest(repo + "@" + digest)
	if err != nil {
		return nil, err
	}
	return payload.Cosign{Image: d}.MarshalJSON()
}

// SignBlob signs data as `cosign sign-blob --key` does: the base64 of the
// signature over its SHA-256.
func SignBlob(s signature.Signer, data []byte) ([]byte, error) {
	sig, err := s.SignMessage(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return []byte(base64.StdEncoding.EncodeToString(sig)), nil
}

// VerifyBlob checks a SignBlob signature with a PEM public key.
func VerifyBlob(pubPEM, data, sigB64 []byte) error {
	v, err := verifier(pubPEM)
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(sigB64)))
	if err != nil {
		return fmt.Errorf("signature is not base64: %w", err)
	}
	return v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(data))
}

// SignDSSE wraps an in-toto statement in a signed DSSE envelope, as
// `cosign attest --key` does.
func SignDSSE(s signature.Signer, statement []byte) ([]byte, error) {
	return dsse.WrapSigner(s, InTotoPayloadType).SignMessage(bytes.NewReader(statement))
}

// VerifyDSSE checks a SignDSSE envelope with a PEM public key.
func VerifyDSSE(pubPEM, envelope []byte) error {
	v, err := verifier(pubPEM)
	if err != nil {
		return err
	}
	return dsse.WrapVerifier(v).VerifySignature(bytes.NewReader(envelope), nil)
}

func verifier(pubPEM []byte) (signature.Verifier, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pubPEM)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	return signature.LoadVerifier(pub, crypto.SHA256)
}
