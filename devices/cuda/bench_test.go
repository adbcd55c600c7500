package cuda

import (
	"runtime"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/devicetest"
)

// The costs that decide how a call finds the device's context current (see doc.go).

// BenchmarkContextPushPop is what every call pays: lock the OS thread, push the context,
// pop it, unlock.
func BenchmarkContextPushPop(b *testing.B) {
	d := benchDevice(b)
	for b.Loop() {
		if err := d.enter(); err != nil {
			b.Fatal(err)
		}
		d.leave()
	}
}

// BenchmarkContextSetCurrent is the alternative that leaves the context current on the
// thread: lock, cuCtxSetCurrent, unlock.
func BenchmarkContextSetCurrent(b *testing.B) {
	d := benchDevice(b)
	for b.Loop() {
		runtime.LockOSThread()
		d.drv.call(d.drv.ctxSetCurrent, d.ctx)
		runtime.UnlockOSThread()
	}
}

// BenchmarkWorkerHandoff is the other alternative's overhead: a round trip to one
// goroutine locked to the thread where the context stays current (the call itself
// excluded).
func BenchmarkWorkerHandoff(b *testing.B) {
	req, done := make(chan func()), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		for f := range req {
			f()
			done <- struct{}{}
		}
	}()
	defer close(req)
	nop := func() {}
	for b.Loop() {
		req <- nop
		<-done
	}
}

// BenchmarkLaunch queues the fixture kernel on 1024 elements, waiting every 256 launches.
func BenchmarkLaunch(b *testing.B) {
	d, k, bufs := benchKernel(b)
	i := 0
	for b.Loop() {
		if err := d.Launch(k, fixtureGeometry(1024), bufs, []int64{1024, 0}); err != nil {
			b.Fatal(err)
		}
		if i++; i%256 == 0 {
			d.Sync()
		}
	}
	d.Sync()
}

// BenchmarkLaunchSync launches and waits, reading the status block each time.
func BenchmarkLaunchSync(b *testing.B) {
	d, k, bufs := benchKernel(b)
	for b.Loop() {
		if err := d.Launch(k, fixtureGeometry(1024), bufs, []int64{1024, 0}); err != nil {
			b.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDevice(b *testing.B) *Device {
	d, err := Open(Options{})
	if err != nil {
		b.Skip(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

func benchKernel(b *testing.B) (*Device, devices.Kernel, []devices.Buffer) {
	d := benchDevice(b)
	nv, err := FindNVRTC()
	if err != nil {
		b.Skip(err)
	}
	ptx, err := nv.Compile(fixtureSource, "fixture.cu", CompileOptions{Arch: d.Arch()})
	if err != nil {
		b.Fatal(err)
	}
	mod, err := d.Load(ptx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mod.Close() })
	k, err := mod.Kernel(devicetest.FixtureKernel)
	if err != nil {
		b.Fatal(err)
	}
	in, _ := d.Alloc(4096)
	out, _ := d.Alloc(4096)
	return d, k, []devices.Buffer{in, out}
}
