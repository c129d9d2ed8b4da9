package backup

import "io"

// stage is one step of a stream run in a goroutine of its own, fed
// through a pipe: encryption, hashing and writing each take a core, so
// that an encrypted snapshot costs little more wall time than a plaintext
// one (bin/bench -only backup).
type stage struct {
	pw   *io.PipeWriter
	done chan error
}

// startStage runs consume on what is written to the stage, until the
// stage is finished; consume reads to EOF.
func startStage(consume func(io.Reader) error) *stage {
	pr, pw := io.Pipe()
	s := &stage{pw: pw, done: make(chan error, 1)}
	go func() {
		err := consume(pr)
		// A producer still writing learns why (nil: io.ErrClosedPipe).
		pr.CloseWithError(err)
		s.done <- err
	}()
	return s
}

func (s *stage) Write(b []byte) (int, error) { return s.pw.Write(b) }

// finish ends the stage's input (with err, when the producer failed),
// waits for it, and returns err or else the stage's own error.
func (s *stage) finish(err error) error {
	s.pw.CloseWithError(err)
	if e := <-s.done; err == nil {
		err = e
	}
	return err
}

// readStage reads r in a goroutine of its own into the returned reader,
// passing every byte to tee on the way (a hash). wait, after the reader
// was read to EOF or closed, waits for it and returns its error.
func readStage(r io.Reader, tee io.Writer) (pr *io.PipeReader, wait func() error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.MultiWriter(pw, tee), r)
		pw.CloseWithError(err)
		done <- err
	}()
	return pr, func() error { return <-done }
}

// errReader keeps the first error other than EOF its reader returned:
// what decryption failed on, apart from the writes after it.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}
