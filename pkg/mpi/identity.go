package mpi

import (
	"crypto/ed25519"
	"encoding/pem"
	"fmt"
	"io"

	"golang.org/x/crypto/ssh"
)

// Secret keys of a job's SSH identity (the kubernetes.io/ssh-auth Secret type names the first).
const (
	SecretPrivateKey = "ssh-privatekey"
	SecretPublicKey  = "ssh-publickey"
)

// Identity is a job's SSH key pair: the launcher logs in to every worker with it, and every
// worker accepts only it.
type Identity struct {
	// PrivateKey is the private key in OpenSSH's PEM format.
	PrivateKey []byte
	// AuthorizedKey is the public key as one authorized_keys line.
	AuthorizedKey []byte
}

// NewIdentity makes an ed25519 key pair from random; comment ends up in the public key's line
// (name the job there, never anything secret).
func NewIdentity(random io.Reader, comment string) (Identity, error) {
	pub, priv, err := ed25519.GenerateKey(random)
	if err != nil {
		return Identity{}, fmt.Errorf("generate an ed25519 key pair: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return Identity{}, fmt.Errorf("encode the ed25519 private key: %w", err)
	}
	pk, err := ssh.NewPublicKey(pub)
	if err != nil {
		return Identity{}, fmt.Errorf("encode the ed25519 public key: %w", err)
	}
	line := ssh.MarshalAuthorizedKey(pk)
	if comment != "" {
		line = append(line[:len(line)-1], " "+comment+"\n"...)
	}
	return Identity{PrivateKey: pem.EncodeToMemory(block), AuthorizedKey: line}, nil
}
