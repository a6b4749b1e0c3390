// Package privatefile writes files only their owner may read (mode 0600), whole or not at
// all: the bytes go to a private temporary file in the same directory, are synced, and only
// then take the final name, so a reader or a crash never sees a half-written file.
package privatefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Replace writes data to path, replacing any file there.
func Replace(path string, data []byte) error {
	return write(path, data, os.Rename)
}

// Create writes data to path only if nothing is there. It reports false, with no error, when
// a file already existed (another writer got there first); that file is left as it was.
func Create(path string, data []byte) (bool, error) {
	err := write(path, data, os.Link)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	return err == nil, err
}

func write(path string, data []byte, place func(tmp, path string) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return place(tmp.Name(), path)
}
