package main

import (
	"context"
	"crypto/sha256"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWaitQuietReturnsOnceIdle(t *testing.T) {
	sleeper := exec.CommandContext(t.Context(), "sleep", "30")
	require.NoError(t, sleeper.Start())
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })

	share, err := waitQuiet(context.Background(), []int{sleeper.Process.Pid}, 0.05, 100*time.Millisecond, 20*time.Second)
	require.NoError(t, err)
	assert.Less(t, share, 0.05)
}

func TestWaitQuietGivesUpOnABusyProcess(t *testing.T) {
	var stopped atomic.Bool
	t.Cleanup(func() { stopped.Store(true) })
	go func() {
		sum := [32]byte{}
		for !stopped.Load() {
			sum = sha256.Sum256(sum[:])
		}
	}()
	share, err := waitQuiet(context.Background(), []int{os.Getpid()}, 0.2, 100*time.Millisecond, 500*time.Millisecond)
	require.NoError(t, err)
	assert.Greater(t, share, 0.2, "this process keeps a core busy")
}

func TestWaitQuietFailsOnAMissingProcess(t *testing.T) {
	_, err := waitQuiet(context.Background(), []int{1 << 30}, 0.05, 10*time.Millisecond, time.Second)
	assert.Error(t, err)
}
