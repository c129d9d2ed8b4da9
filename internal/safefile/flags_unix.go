//go:build unix

package safefile

import "syscall"

// nonblock keeps open(2) from waiting for a writer on a FIFO.
const nonblock = syscall.O_NONBLOCK
