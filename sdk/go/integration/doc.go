// Package integration holds the Go worker's end-to-end tests: the real Python server as a
// subprocess, flows deployed with the Python CLI, instances completed by the Go worker in
// every execution mode. It has no code of its own.
package integration
