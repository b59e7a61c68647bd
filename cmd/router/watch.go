package main

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"time"
)

// Bounds of --watch-interval: often enough to apply a change within seconds, rarely
// enough that reading the files costs nothing.
const (
	minWatchInterval = 100 * time.Millisecond
	maxWatchInterval = 5 * time.Minute
)

// watchConfig reloads the configuration whenever the content of its files changes, until
// ctx is done. It polls a hash of what the file paths resolve to rather than watching
// with inotify (fsnotify): a Kubernetes ConfigMap update replaces the `..data` symlink
// its file names go through, editors save by renaming a new file over the old, and both
// leave an inotify watch on a path's old inode; reading a few kilobytes per interval
// sees every such change, through any number of symlinks, with no dependency. A file
// that cannot be read (mid-swap, or removed) skips the tick and keeps the running plan.
// reload reports its own outcome: a refused configuration is logged with its errors and
// the running plan stays.
func watchConfig(ctx context.Context, files []string, every time.Duration, reload func(), log *slog.Logger) {
	last, _ := hashFiles(files)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h, err := hashFiles(files)
		if err != nil {
			log.Warn("config watch: cannot read the config, keeping the running plan", "error", err)
			continue
		}
		if h == last {
			continue
		}
		last = h
		log.Info("config watch: the config changed, reloading", "files", files)
		reload()
	}
}

// hashFiles hashes the content of files in order, each followed by its length so that
// no two sets of contents hash alike by moving bytes between files.
func hashFiles(files []string) ([sha256.Size]byte, error) {
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return [sha256.Size]byte{}, err
		}
		h.Write(b)
		h.Write([]byte{byte(len(b) >> 24), byte(len(b) >> 16), byte(len(b) >> 8), byte(len(b))})
	}
	return [sha256.Size]byte(h.Sum(nil)), nil
}
