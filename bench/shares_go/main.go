// SPDX-License-Identifier: GPL-2.0

// Command shares is bench/shares.c in Go: goroutines with known CPU shares
// under distinct pprof labels, profiled by Go's own CPU profiler.
//
//	shares -o cpu.pb.gz [-threads N] [-unit-ms MS]
//
// Goroutine i, locked to its own thread, runs under pprof.Do with
// share=t<i> until its thread's CPU time reaches (i + 1) * MS ms, then
// prints the kernel's accounting of that thread's CPU time (the first
// field of /proc/thread-self/schedstat) as "thread t<i> cpu_ns <ns>".
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

const rusageThread = 1 // RUSAGE_THREAD

var sink uint64

func threadCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

//go:noinline
func burn(x uint64) uint64 {
	for i := 0; i < 20000; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

func schedstat() int64 {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n
}

func main() {
	out := flag.String("o", "cpu.pb.gz", "CPU profile to write")
	n := flag.Int("threads", 4, "threads, 2 to 8")
	unitMs := flag.Int("unit-ms", 250, "CPU time of thread 0, ms")
	flag.Parse()
	if *n < 2 || *n > 8 {
		fmt.Fprintln(os.Stderr, "shares: -threads wants 2..8")
		os.Exit(2)
	}
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shares:", err)
		os.Exit(1)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "shares:", err)
		os.Exit(1)
	}
	cpu := make([]int64, *n)
	var ready, wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < *n; i++ {
		ready.Add(1)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			runtime.LockOSThread()
			goal := int64(i+1) * int64(*unitMs) * 1000000
			labels := pprof.Labels("share", fmt.Sprintf("t%d", i))
			pprof.Do(context.Background(), labels,
				func(context.Context) {
					x := uint64(i)
					ready.Done()
					<-start
					for threadCPU() < goal {
						x = burn(x)
					}
					sink += x
				})
			cpu[i] = schedstat()
		}(i)
	}
	ready.Wait()
	close(start)
	wg.Wait()
	pprof.StopCPUProfile()
	f.Close()
	for i, ns := range cpu {
		fmt.Printf("thread t%d cpu_ns %d\n", i, ns)
	}
}
