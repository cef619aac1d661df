//go:build !linux

package all
