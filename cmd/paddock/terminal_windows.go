package main

import "os"

// notifyResize does nothing on Windows: its console sends no signal when
// it is resized, so a terminal keeps the size it opened with.
func notifyResize(chan<- os.Signal) {}
