package spec

import (
	"bytes"
	"errors"
)

// ParseCredentials reads the content of auth.credentialsFile: the first
// line is user:password (the password may contain ':'). Errors say what is
// wrong, never what the file holds: it is a password.
func ParseCredentials(data []byte) (user, password string, err error) {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	u, p, ok := bytes.Cut(line, []byte(":"))
	switch {
	case !ok:
		return "", "", errors.New("the first line must be user:password, and it has no ':'")
	case len(u) == 0:
		return "", "", errors.New("the first line must be user:password, and the user before ':' is empty")
	case len(p) == 0:
		return "", "", errors.New("the first line must be user:password, and the password after ':' is empty")
	}
	return string(u), string(p), nil
}
