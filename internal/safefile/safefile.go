// Package safefile reads input files that an operator names (a spec, a
// kubeadm manifest) without trusting them: regular files only, up to a
// size limit, so that /dev/zero, a FIFO or a huge file gives an error
// instead of exhausting memory or hanging.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrNotRegular and ErrTooLarge are what Read refuses; they come back
// wrapped with the path.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
)

// Read reads path, which must be a regular file of at most limit bytes.
// The open does not block on a FIFO, and the size is checked both before
// and while reading (a file that grows is cut off).
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s): give a file", path, ErrNotRegular, kind(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, tooLarge(path, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(path, limit)
	}
	return data, nil
}

func tooLarge(path string, limit int64) error {
	return fmt.Errorf("%s: %w: larger than %d bytes, which no such file needs", path, ErrTooLarge, limit)
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}
