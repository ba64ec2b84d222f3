// SPDX-License-Identifier: GPL-2.0

// Package labelcost measures what Go's pprof labels cost, for comparison
// with libplabel (bench/label_cost.c runs this with
// `go test -run NONE -bench . -benchmem` and prints both side by side).
// The labels are the ones the C benchmark uses.
package labelcost

import (
	"context"
	"runtime/pprof"
	"testing"
)

// Switching a goroutine between two prepared label sets: the counterpart
// of plabel_switch between two interned sets.
func BenchmarkSetGoroutineLabels(b *testing.B) {
	base := context.Background()
	c1 := pprof.WithLabels(base, pprof.Labels("service", "api"))
	c2 := pprof.WithLabels(base, pprof.Labels("service", "batch"))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 2 {
		pprof.SetGoroutineLabels(c1)
		pprof.SetGoroutineLabels(c2)
	}
	pprof.SetGoroutineLabels(base)
}

func work(context.Context) {}

// One request: two labels merged on top of the current ones, run, restore;
// the counterpart of a cached plabel_do.
func BenchmarkDo(b *testing.B) {
	ctx := pprof.WithLabels(context.Background(),
		pprof.Labels("service", "api"))
	pprof.SetGoroutineLabels(ctx)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pprof.Do(ctx, pprof.Labels("endpoint", "/api/users",
			"tenant", "acme"), work)
	}
}
