// SPDX-License-Identifier: GPL-2.0

// Command shares is bench/shares.c in Go: goroutines with known CPU shares
// under distinct pprof labels, profiled by Go's own CPU profiler.
//
//	shares -o cpu.pb.gz [-threads N] [-unit-ms MS] [-switch-us US]
//
// Goroutine i, locked to its own thread, runs under pprof.Do with
// share=t<i> until its thread's CPU time reaches (i + 1) * MS ms, then
// prints the kernel's accounting of that thread's CPU time (the first
// field of /proc/thread-self/schedstat) as "thread t<i> cpu_ns <ns>".
//
// With -switch-us every goroutine serves requests instead, switching its
// labels for each (pprof.SetGoroutineLabels), as bench/shares.c does: each
// request takes one of share=t0 .. t<N-1> at random and burns 1/2 to 3/2
// (at random) of (j + 1) * US us of its thread's CPU time, until the thread
// has used (N + 1) / 2 * MS ms; what each label got, from the thread's CPU
// clock around each request, is printed as "label t<j> cpu_ns <ns>".
// With -cycle the requests go t0, t1, .. in turn, each exactly its length.
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
	"unsafe"
)

const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID

// threadClock is the calling thread's CPU clock, in ns.
func threadClock() int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime,
		uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

//go:noinline
func burnShort(x uint64) uint64 {
	for i := 0; i < 500; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// switching is one goroutine of -switch-us: requests under random labels;
// labelNs[j] gets the CPU time of the requests under t<j>.
func switching(i, n int, unitMs, switchUs int64, cycle bool,
	ctxs []context.Context, labelNs []int64, ready *sync.WaitGroup,
	start chan struct{}) {
	runtime.LockOSThread()
	goal := int64(n+1) * unitMs * 1000000 / 2
	x := uint64(i)
	rnd := 0x9e3779b97f4a7c15 * uint64(i+1)
	j := -1
	ready.Done()
	<-start
	t := threadClock()
	for t < goal {
		var length int64
		if cycle {
			// t0, t1, .. in turn, each its exact length
			j = (j + 1) % n
			length = int64(j+1) * switchUs * 1000
		} else {
			// xorshift64: the label and a length of 1/2 to 3/2 of its mean
			rnd ^= rnd << 13
			rnd ^= rnd >> 7
			rnd ^= rnd << 17
			j = int((rnd >> 32) % uint64(n))
			mean := int64(j+1) * switchUs * 1000
			length = mean/2 + int64(rnd&0xffff)*mean/0x10000
		}
		pprof.SetGoroutineLabels(ctxs[j])
		t0 := threadClock()
		for t-t0 < length {
			x = burnShort(x)
			t = threadClock()
		}
		labelNs[j] += t - t0
	}
	pprof.SetGoroutineLabels(context.Background())
	sink += x
}

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
	switchUs := flag.Int("switch-us", 0, "switch labels every request of (j + 1) * this many us")
	cycle := flag.Bool("cycle", false, "with -switch-us: requests in turn, of exact lengths")
	flag.Parse()
	if *n < 2 || *n > 8 || *unitMs < 1 || *switchUs < 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "shares: -threads wants 2..8, -unit-ms > 0, -switch-us >= 0")
		os.Exit(2)
	}
	ctxs := make([]context.Context, *n)
	for j := range ctxs {
		ctxs[j] = pprof.WithLabels(context.Background(),
			pprof.Labels("share", fmt.Sprintf("t%d", j)))
	}
	labelNs := make([][]int64, *n)
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
		if *switchUs > 0 {
			labelNs[i] = make([]int64, *n)
			go func(i int) {
				defer wg.Done()
				switching(i, *n, int64(*unitMs), int64(*switchUs),
					*cycle, ctxs, labelNs[i], &ready, start)
			}(i)
			continue
		}
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
	if *switchUs > 0 {
		for j := 0; j < *n; j++ {
			var ns int64
			for i := 0; i < *n; i++ {
				ns += labelNs[i][j]
			}
			fmt.Printf("label t%d cpu_ns %d\n", j, ns)
		}
		return
	}
	for i, ns := range cpu {
		fmt.Printf("thread t%d cpu_ns %d\n", i, ns)
	}
}
