package hypervisor_test

import (
	"strings"
	"testing"

	"paddock.dev/paddock/hypervisor"
)

// TestParseSizeAndReserve: the sizes and reserves serve's flags take, the
// default reserve's floor and ceiling, and what is refused.
func TestParseSizeAndReserve(t *testing.T) {
	for in, want := range map[string]int64{
		"512": 512 << 20, "512MiB": 512 << 20, "512m": 512 << 20, "2GiB": 2 << 30, "1.5G": 3 << 29,
		"64KiB": 64 << 10, "1TB": 1 << 40, " 3 GiB ": 3 << 30, "100b": 100,
	} {
		if got, err := hypervisor.ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1GiB", "2 parsecs", "NaN", "2PiB", "1.2.3G"} {
		if n, err := hypervisor.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, n)
		}
	}
	const gib = int64(1) << 30
	for _, tc := range []struct {
		in    string
		total int64
		want  int64
	}{
		{"", 100 * gib, 5 * gib},         // 5%
		{"", 2 * gib, 512 << 20},         // at least 512 MiB
		{"", 600 << 20, 300 << 20},       // at most half
		{"10%", 100 * gib, 10 * gib},     // a percentage
		{"256MiB", 100 * gib, 256 << 20}, // a size
		{"4GiB", 2 * gib, 2 * gib},       // never more than the disk
	} {
		r, err := hypervisor.ParseReserve(tc.in)
		if err != nil {
			t.Fatalf("ParseReserve(%q): %v", tc.in, err)
		}
		if got := r.Of(tc.total); got != tc.want {
			t.Errorf("reserve %q of %d = %d, want %d", tc.in, tc.total, got, tc.want)
		}
	}
	for in, want := range map[string]string{"0%": "above 0", "51%": "at most 50", "x%": "percentage", "0": "more than 0", "lots": "a percentage (5%) or a size"} {
		if _, err := hypervisor.ParseReserve(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseReserve(%q): %v, want %q", in, err, want)
		}
	}
	if mb, err := hypervisor.HostMemoryMB(); err != nil || mb <= 0 {
		t.Errorf("HostMemoryMB: %d %v", mb, err)
	}
}
