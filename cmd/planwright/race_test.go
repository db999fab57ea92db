//go:build race

package main

// raceEnabled: this test binary runs under the race detector, and so do the
// servers it builds (planwrightBinary).
const raceEnabled = true
