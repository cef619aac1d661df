package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// ErrSecret: ledger data has a key that names a secret.
var ErrSecret = errors.New("ledger data must not hold secrets")

// secretWords are refused anywhere in a normalised key.
var secretWords = []string{"secret", "password", "passwd", "passphrase", "authorization", "apikey", "privatekey", "cookie"}

// SecretKey reports whether a JSON object key names a secret. The key is
// lowercased and stripped of everything but letters and digits
// ("X-Api-Key" → "xapikey"); it names a secret if it contains one of
// secret, password, passwd, passphrase, authorization, apikey, privatekey,
// cookie, or ends in "token" (token, access_token, X-Auth-Token).
// Keys that name a thing about a token rather than the token itself
// (token_id, tokens, max_tokens) are allowed.
func SecretKey(key string) bool {
	var b strings.Builder
	for _, r := range strings.ToLower(key) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	k := b.String()
	if strings.HasSuffix(k, "token") {
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// CheckNoSecrets returns an error wrapping ErrSecret if data, at any depth
// (objects inside arrays too), has an object key for which SecretKey is
// true. The error names the key's path, never its value. It looks at keys
// only: a secret passed as a value under an innocent key (or as a header
// pair in an array) is not caught, so callers still choose what to ledger.
func CheckNoSecrets(data json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("data is not valid JSON: %w", err)
	}
	if path := findSecret(v, "$"); path != "" {
		return fmt.Errorf("key %s names a secret; ledger what was done, not the credential: %w", path, ErrSecret)
	}
	return nil
}

func findSecret(v any, path string) string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys) // report the same key every time
		for _, k := range keys {
			p := path + "." + k
			if SecretKey(k) {
				return p
			}
			if found := findSecret(v[k], p); found != "" {
				return found
			}
		}
	case []any:
		for i, e := range v {
			if found := findSecret(e, path+"["+strconv.Itoa(i)+"]"); found != "" {
				return found
			}
		}
	}
	return ""
}
