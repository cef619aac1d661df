package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"regexp"

	apiv1 "paddock.dev/paddock/api"
)

// Token formats. Every Paddock token starts with "pdk_".
//
//	session token: pdk_tok-<16 hex: public id>_<64 hex: 256 random bits>
//	tenant token:  pdk_tn_<64 hex: 256 random bits>
//	admin token:   pdk_<48 hex> when the daemon generates it, or any
//	               PADDOCK_ADMIN_TOKEN of 16 characters or more
//
// The id part of a session token is not secret: it is how the daemon
// finds the token's record (and how it is listed, revoked and ledgered).
// The whole token is what is hashed and compared.
const (
	TokenPrefix          = apiv1.TokenPrefix
	SessionTokenIDPrefix = apiv1.SessionTokenIDPrefix
	tenantTokenPrefix    = TokenPrefix + "tn_"
	// MaxTokenBytes bounds what is read from an Authorization header.
	MaxTokenBytes = 512
)

var (
	tokenIDRE      = regexp.MustCompile(`^tok-[0-9a-f]{16}$`)
	sessionTokenRE = regexp.MustCompile(`^pdk_(tok-[0-9a-f]{16})_[0-9a-f]{64}$`)
)

// HashToken is the SHA-256 of a token: all the daemon keeps of one.
func HashToken(token string) [32]byte { return sha256.Sum256([]byte(token)) }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// NewSessionToken returns a fresh session token, its public id and its
// hash.
func NewSessionToken() (id, token string, hash [32]byte) {
	id = SessionTokenIDPrefix + randomHex(8)
	token = TokenPrefix + id + "_" + randomHex(32)
	return id, token, HashToken(token)
}

// SessionTokenID returns the public id of a token in the session-token
// format.
func SessionTokenID(token string) (string, bool) {
	m := sessionTokenRE.FindStringSubmatch(token)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// IsTokenID reports whether s has the form of a session token's id.
func IsTokenID(s string) bool { return tokenIDRE.MatchString(s) }

// NewTenantToken returns a fresh tenant token and the hex SHA-256 that
// goes in the tenants file.
func NewTenantToken() (token, sha256Hex string) {
	token = tenantTokenPrefix + randomHex(32)
	h := HashToken(token)
	return token, hex.EncodeToString(h[:])
}
